"""Time as the health tracker sees it: a Protocol, the system clock, and a manual one for tests.

Recovery waits ("no error for 300 s") are measured on the monotonic clock; the wall clock only
stamps a condition's `lastTransitionTime`. Injecting both keeps the tracker's tests free of
sleeps and its timestamps deterministic.
"""

from __future__ import annotations

import datetime
import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    def now(self) -> datetime.datetime:
        """The wall-clock time, timezone-aware (UTC)."""
        ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC)


class ManualClock:
    """A clock that moves only when told to (`advance`)."""

    def __init__(self, start: datetime.datetime | None = None) -> None:
        self._wall = start or datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
        self._mono = 1000.0

    def monotonic(self) -> float:
        return self._mono

    def now(self) -> datetime.datetime:
        return self._wall

    def advance(self, seconds: float) -> None:
        self._mono += seconds
        self._wall += datetime.timedelta(seconds=seconds)
