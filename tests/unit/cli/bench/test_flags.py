"""`tessera bench`: every target has `-o`, and flags that cannot work end in one line and exit code 2."""

from __future__ import annotations

import argparse
import json

import pytest

from cli import bench
from cli.main import main


def test_every_target_takes_the_output_flag() -> None:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    for target in bench._targets():
        name = target.replace("_", "-")
        required = ["--runtime-endpoint", "x", "--image", "y"] if name == "runtime-proxy" else []
        assert parser.parse_args([name, *required, "-o", "json"]).output == "json"
        assert parser.parse_args([name, *required]).output == "table"


def test_bad_flags_are_one_line_and_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "scheduler", "--nodes", "0", "-o", "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no half report
    assert captured.err == "tessera bench: --nodes and --pods must be positive, --gpus-per-node not negative\n"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--gang-fraction", "1.5"], "--gang-fraction must be within 0..1, got 1.5"),
        (["--gang-sizes", "8-2"], "--gang-sizes must be MIN-MAX with 1 <= MIN <= MAX, got '8-2'"),
    ],
)
def test_bad_gang_flags_are_one_line(flags: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "scheduler", *flags, "-o", "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"tessera bench: {message}\n"


def test_the_gang_mix_schedules_gangs_whole(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "scheduler", "--nodes", "20", "--pods", "200", "--gang-fraction", "0.3", "--gang-sizes", "2-4"]
    assert main([*args, "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert 50 <= result["gang_pods"] <= 70
    assert result["gangs_allowed"] >= 10
    assert 0 < result["gang_allowed"]["p50_ms"] <= result["gang_allowed"]["p99_ms"]


def test_a_baseline_runs_pod_for_pod_beside_and_gives_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "scheduler", "--nodes", "10", "--pods", "60", "--gang-fraction", "0.3", "--gang-sizes", "2-3"]
    assert main([*args, "--scoring", "BalancedFGD", "--baseline", "LeastAllocated", "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["baseline"] == "LeastAllocated"
    assert result["baseline_scheduled"] > 0 and result["baseline_cycle"]["samples"] == 60
    cpu_ratio = result["pods_per_cpu_second"] / result["baseline_pods_per_cpu_second"]
    assert result["ratio_cpu"] == pytest.approx(cpu_ratio, abs=1e-3)
    assert result["ratio"] == pytest.approx(result["pods_per_second"] / result["baseline_pods_per_second"], abs=1e-3)
    # Each scheduler's own cycles, not the span both share: at most its cycles' count × their max.
    assert result["wall_seconds"] <= 60 * result["max_ms"] / 1000 + 0.0005
    # The report gives seconds to the millisecond: the rate lies within that rounding.
    wall = result["wall_seconds"]
    assert 60 / (wall + 0.0005) * 0.999 <= result["pods_per_second"] <= 60 / max(wall - 0.0005, 1e-9) * 1.001
