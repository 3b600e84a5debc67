"""Waiting on a condition instead of sleeping: tests on a loaded machine wait as long as needed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_for"]

T = TypeVar("T")


def wait_for(
    check: Callable[[], T], *, timeout_s: float = 30.0, what: str = "the condition", poll_s: float = 0.02
) -> T:
    """Call `check` until it returns something truthy, and return that.

    `timeout_s` only bounds a test that would otherwise hang: it is generous on purpose, and no
    test asserts how quickly the condition came. Raises AssertionError naming `what` on timeout.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(poll_s)
