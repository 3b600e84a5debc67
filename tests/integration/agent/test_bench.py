"""`tessera bench agent` runs the agent's loops on simulated GPUs and reports their cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def test_bench_agent_reports_cpu_and_memory() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "agent", "--seconds", "1", "--metrics-interval", "0.2"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    report = json.loads(out)
    assert (report["gpus"], report["rdma"]) == (8, 4)
    assert report["metrics_refreshes"] >= 2
    assert report["rss_mib"] > 0 and report["cpu_percent_of_one_core"] >= 0
