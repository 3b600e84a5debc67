"""`tessera bench agent-process` runs the whole agent beside an API server and reports its cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def test_bench_agent_process_reports_cpu_memory_and_latency() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "agent-process", "--seconds", "2", "--profile", "t4-2x"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=180,
    ).stdout
    report = json.loads(out)
    assert report["rss_mib_peak"] > 0 and report["cpu_percent_of_one_core"] >= 0
    assert report["xid_to_cr_ms"]["samples"] == 2  # one per GPU of the profile
