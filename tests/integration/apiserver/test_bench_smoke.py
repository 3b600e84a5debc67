"""`tessera bench apiserver --smoke`: the benchmark runs end to end (numbers are not checked)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_benchmark_smoke_run(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "apiserver", "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    names = {r["name"] for r in json.loads(out.read_text())}
    assert {"creates", "watch fan-out", "pod lifecycle (create, annotate, bind, status)"} <= names
    fanout = next(r for r in json.loads(out.read_text()) if r["name"] == "watch fan-out")
    assert fanout["delivered"] == fanout["expected"]


def test_flood_benchmark_smoke_run() -> None:
    """`tessera bench apiserver-flood`: both phases measured, the flood answered (numbers not checked)."""
    flags = ["--seconds", "0.5", "--flooders", "1", "--body-mb", "1.5", "--slow-connections", "3", "-o", "json"]
    result = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "apiserver-flood", *flags],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert doc["quiet"]["samples"] > 0 and doc["flood"]["samples"] > 0
    assert doc.get("flood_status_413", 0) > 0, "the YAML past the node limit is refused"
