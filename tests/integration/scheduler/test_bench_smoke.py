"""`tessera bench scheduler-e2e` works end to end (a tiny run; the real numbers are in docs/user/scheduler.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def test_bench_smoke() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "scheduler-e2e", "--nodes", "3", "--pods", "24", "-o", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=240,
    ).stdout
    result = json.loads(out)
    assert result["bound"] == result["pods"] == 24
    assert result["over_committed"] == 0
    assert result["pods_per_second"] > 0 and 0 < result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]
