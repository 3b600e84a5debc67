"""`tessera bench agent` and `tessera bench agent-process` run the agent on simulated GPUs and report its cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def bench(*args: str) -> dict[str, Any]:
    """Run `tessera bench ARGS -o json` and return the JSON it prints."""
    out = subprocess.run(
        [sys.executable, "-m", "cli", "bench", *args, "-o", "json"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=180,
    ).stdout
    report: dict[str, Any] = json.loads(out)
    return report


def test_bench_agent_reports_cpu_and_memory() -> None:
    report = bench("agent", "--seconds", "1", "--metrics-interval", "0.2")
    assert (report["gpus"], report["rdma"]) == (8, 4)
    assert report["metrics_refreshes"] >= 2
    assert report["rss_mib"] > 0 and report["cpu_percent_of_one_core"] >= 0


def test_bench_agent_process_reports_cpu_memory_and_latency() -> None:
    report = bench("agent-process", "--seconds", "2", "--profile", "t4-2x")
    assert report["rss_mib_peak"] > 0 and report["cpu_percent_of_one_core"] >= 0
    assert report["xid_to_cr_ms"]["samples"] == 2  # one per GPU of the profile
