"""Every `tessera bench` target accepts `-o json` and prints one JSON object with the common fields
and at least one latency summary (count and percentiles in order). Each runs at its cheapest
settings, all at once (a module fixture starts them; each test waits for its own): this checks
the shared reporting, not the numbers."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli import bench
from tests.support import cgroups, containerd

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]

#: target -> its cheapest flags; qos and runtime-proxy need root (and more) and have their own tests below.
CHEAP: dict[str, list[str]] = {
    "agent": ["--seconds", "0.5", "--metrics-interval", "0.2"],
    "agent-process": ["--seconds", "1", "--profile", "t4-2x"],
    "apiserver": ["--smoke"],
    "apiserver-flood": ["--seconds", "0.5", "--flooders", "1", "--body-mb", "0.1", "--slow-connections", "2"],
    "controller": ["--nodes", "3", "--idle-seconds", "0.2"],
    "hooks": ["--iterations", "20", "--warmup", "2"],
    "leader-election": ["--rounds", "1"],
    "quota": ["--top", "2", "--middle", "3", "--leaves", "4", "--events", "20", "--full", "2"],
    "scheduler": ["--nodes", "3", "--pods", "20"],
    "scheduler-e2e": ["--nodes", "2", "--pods", "10"],
}
NEEDS_ROOT = {"qos", "runtime-proxy"}
#: The soak's cheapest run is a minute of the whole system: tests/e2e/test_soak.py runs it and checks its JSON.
ELSEWHERE = {"soak"}
SUMMARY = {"samples", "p50_ms", "p90_ms", "p99_ms", "max_ms"}


class Run:
    """One `tessera bench TARGET ... -o json` process, its output in files (no pipe to fill up)."""

    def __init__(self, directory: Path, target: str, *flags: str) -> None:
        self.stdout = directory / f"{target}.out"
        self.stderr = directory / f"{target}.err"
        with self.stdout.open("w") as out, self.stderr.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "cli", "bench", "--v=0", target, *flags, "-o", "json"],
                cwd=ROOT,
                stdout=out,
                stderr=err,
            )

    def report(self) -> dict[str, Any]:
        try:
            code = self.process.wait(timeout=120)
        finally:
            self.process.kill()  # no-op once it has exited; a hung benchmark must not outlive the test
        output = self.stdout.read_text()
        assert code == 0, output + self.stderr.read_text()
        doc: dict[str, Any] = json.loads(output)  # the whole of stdout is one JSON document
        return doc


def run_json(target: str, *flags: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        return Run(Path(directory), target, *flags).report()


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, Run]]:
    """Every cheap target, started together: the whole module takes about as long as the slowest."""
    with tempfile.TemporaryDirectory() as directory:
        started = {target: Run(Path(directory), target, *flags) for target, flags in CHEAP.items()}
        try:
            yield started
        finally:
            for run in started.values():
                run.process.kill()
                run.process.wait()


def check_report(doc: dict[str, Any], target: str) -> None:
    assert doc["benchmark"] == target
    assert doc["python"] and doc["cpus"] >= 1
    summaries = [doc] if doc.keys() >= SUMMARY else []
    summaries += [v for v in doc.values() if isinstance(v, dict) and v.keys() >= SUMMARY]
    assert summaries, f"no latency summary in {doc}"
    for s in summaries:
        assert s["samples"] >= 1
        assert 0 <= s["p50_ms"] <= s["p90_ms"] <= s["p99_ms"] <= s["max_ms"]


def test_every_target_is_covered() -> None:
    targets = {t.replace("_", "-") for t in bench._targets()}
    assert targets == CHEAP.keys() | NEEDS_ROOT | ELSEWHERE


@pytest.mark.parametrize("target", sorted(CHEAP))
def test_json_output(runs: dict[str, Run], target: str) -> None:
    check_report(runs[target].report(), target)


@pytest.mark.root
def test_json_output_qos() -> None:
    cgroups.v1_hierarchy()  # or skip, as the QoS tests do
    check_report(run_json("qos", "--pods", "3", "--passes", "2", "--skip-reaction"), "qos")


@pytest.mark.root
def test_json_output_runtime_proxy(ctrd: containerd.Containerd) -> None:
    flags = ["--runtime-endpoint", ctrd.address, "--image", ctrd.image, "--iterations", "3", "--warmup", "1"]
    doc = run_json("runtime-proxy", *flags, "--cgroup-parent", ctrd.cgroup_parent)
    check_report(doc, "runtime-proxy")
    assert doc["create_direct"]["samples"] == doc["create_via_proxy"]["samples"] == 3
