"""A clock a test moves by hand, for code that takes its clock as a parameter (`clock=time.monotonic`
in production): queues, deferrals, leases and schedules are tested without sleeping.

    clock = FakeClock(1000.0)
    queue = WorkQueue(clock=clock)
    clock.advance(5)          # or clock.now = ...
"""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    """Returns `now` when called; only the test moves it."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
