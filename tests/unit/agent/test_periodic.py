"""The loop thread: steps, survives a failing step, stops."""

from __future__ import annotations

import threading

import pytest

from agent.periodic import Periodic


def test_steps_until_stopped_and_survives_a_failing_step(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []
    third = threading.Event()

    def step() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("bad reading")
        if len(calls) >= 3:
            third.set()

    loop = Periodic("test", step, 0)
    loop.start()
    try:
        assert third.wait(5)
    finally:
        loop.stop()
    assert "Loop step failed; continuing" in caplog.text
    with pytest.raises(RuntimeError, match="already started"):
        loop.start()


def test_a_started_loop_steps_at_least_once() -> None:
    calls: list[int] = []
    loop = Periodic("once", lambda: calls.append(1), 3600)
    loop.start()
    loop.stop()
    assert calls == [1]
