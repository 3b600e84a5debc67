"""`tessera bench scheduler --reservations N`: a tiny run holds N Reservations through every cycle
(the real numbers are in docs/scheduling.md)."""

from __future__ import annotations

import json

import pytest

from cli.main import main


def test_reservations_are_placed_before_the_pods(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "scheduler", "--nodes", "4", "--gpus-per-node", "8", "--pods", "20", "--reservations", "8"]
    assert main([*args, "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["reservations"] == 8 and result["reservations_available"] == 8
    assert result["scheduled"] > 0
    assert main(["bench", "scheduler", "--reservations", "-1", "-o", "json"]) == 2
    assert capsys.readouterr().err == "tessera bench: --reservations must not be negative, got -1\n"
