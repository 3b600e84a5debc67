"""The eviction rate limit: a token bucket (golang.org/x/time/rate's shape) that is only asked.

Unlike the controller's limiter, which callers queue behind, a migration that finds no token
does not wait in a thread: it stays where it is and the next sync asks again. So the bucket has
two questions — `available()` (may one eviction go now?) and `take()` (one went) — and the
refusal is reported like every other rule, with the seconds until the next token.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """`burst` evictions at once, then `qps` per second. Single-threaded (the descheduler's loop)."""

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def wait_seconds(self) -> float:
        """0.0 when a token is there now, else the seconds until one will be."""
        self._refill()
        return 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / self.qps

    def take(self) -> None:
        """Spend one token (call only after `wait_seconds()` said 0)."""
        self._refill()
        self._tokens -= 1.0
