"""`tessera bench`: every target has `-o`, and flags that cannot work end in one line and exit code 2."""

from __future__ import annotations

import argparse

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
