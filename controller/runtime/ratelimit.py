"""How long a failed key waits before its next try: client-go's workqueue rate limiters.

Two limits combine (`MaxOf`), as in client-go's default controller rate limiter:
- `ItemBackoff`: per key, exponential in the number of failures since the key last succeeded
  (5 ms, 10 ms, 20 ms, ... capped at `maximum`), so one broken object backs off on its own;
- `TokenBucket`: over all keys, at most `qps` retries per second after a burst, so a mass failure
  (the API server away) cannot turn into a retry storm.

Only retries are limited: fresh events go into the queue at once. Limiters are thread-safe and
take the clock as a parameter, so tests step time instead of sleeping.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["ItemBackoff", "MaxOf", "RateLimiter", "RateLimiterSettings", "TokenBucket"]

Clock = Callable[[], float]


class RateLimiter(Protocol):
    def when(self, key: Hashable) -> float:
        """Seconds `key` must wait before its next try; counts one more failure of `key`."""
        ...

    def forget(self, key: Hashable) -> None:
        """`key` succeeded (or was given up): its next failure starts from the first delay."""
        ...

    def failures(self, key: Hashable) -> int:
        """Failures of `key` since it was last forgotten."""
        ...


class ItemBackoff:
    """Per-key exponential backoff: `base * 2**failures`, at most `maximum` seconds."""

    def __init__(self, base: float = 0.005, maximum: float = 300.0) -> None:
        if not 0 < base <= maximum:
            raise ValueError(f"need 0 < base ({base}) <= maximum ({maximum})")
        self.base = base
        self.maximum = maximum
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, key: Hashable) -> float:
        with self._lock:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        if n >= 64:  # 2**64 * base is past any maximum; avoid float overflow
            return self.maximum
        return min(math.ldexp(self.base, n), self.maximum)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        with self._lock:
            return self._failures.get(key, 0)


class TokenBucket:
    """An overall limit: `burst` tries at once, then `qps` per second (golang.org/x/time/rate).

    `when` reserves a token and returns how long until it is valid, so callers queue behind each
    other instead of all waking at the same moment.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def when(self, key: Hashable) -> float:
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def take(self) -> float:
        """Take a token if one is there (0.0); else take nothing and say how many seconds until
        one will be (for callers that come back later rather than queue behind each other)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return 0.0
            return (1.0 - self._tokens) / self.qps

    def forget(self, key: Hashable) -> None:
        return None

    def failures(self, key: Hashable) -> int:
        return 0


class MaxOf:
    """The longest wait any of `limiters` asks for; failures as the per-key one counts them."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOf needs at least one limiter")
        self._limiters = limiters

    def when(self, key: Hashable) -> float:
        return max(limiter.when(key) for limiter in self._limiters)

    def forget(self, key: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def failures(self, key: Hashable) -> int:
        return max(limiter.failures(key) for limiter in self._limiters)


@dataclass(frozen=True, slots=True)
class RateLimiterSettings:
    """client-go's defaults, except a 5-minute cap (theirs is 1000 s) so a fixed object is retried
    soon enough without an event."""

    base_delay: float = 0.005
    max_delay: float = 300.0
    qps: float = 10.0
    burst: int = 100

    def build(self, clock: Clock = time.monotonic) -> RateLimiter:
        return MaxOf(ItemBackoff(self.base_delay, self.max_delay), TokenBucket(self.qps, self.burst, clock=clock))
