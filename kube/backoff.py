"""Exponential backoff with jitter, for everything in `kube/` that retries.

Informers reconnecting, leader candidates, conflict retries and the event recorder all wait
between attempts the same way, so a restarting API server is not hit by a synchronized herd.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    initial: float = 0.2
    maximum: float = 10.0
    factor: float = 2.0
    #: Each delay is stretched by up to this fraction at random.
    jitter: float = 0.2

    def delays(self, rand: Callable[[], float] = random.random) -> Iterator[float]:
        """An endless series: initial, initial*factor, ... capped at maximum, each jittered."""
        delay = self.initial
        while True:
            yield delay * (1 + self.jitter * rand())
            delay = min(delay * self.factor, self.maximum)
