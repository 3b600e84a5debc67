"""The scheduler's health from its Prometheus metrics: pods bound per second, the p99 of one
scheduling cycle, and its queue lengths.

Pure: two scrapes (`Scrape`, parsed samples and when they were taken) in, numbers out. Rates
and the p99 are over the interval between the two scrapes, as Prometheus' `rate()` and
`histogram_quantile()` would compute them; with one scrape, the p99 is over the process's life
and the rate is unknown (None).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["BINDINGS", "CYCLE", "PENDING", "Samples", "SchedulerHealth", "Scrape", "health", "quantile"]

#: Sample name, sorted (label, value) pairs -> value (what `kube.process.Samples` holds).
Samples = Mapping[tuple[str, tuple[tuple[str, str], ...]], float]

BINDINGS: Final = "tessera_scheduler_bindings_total"
CYCLE: Final = "tessera_scheduler_scheduling_attempt_duration_seconds"
PENDING: Final = "tessera_scheduler_pending_pods"


@dataclass(frozen=True, slots=True)
class Scrape:
    at: float  # monotonic seconds
    samples: Samples


@dataclass(frozen=True, slots=True)
class SchedulerHealth:
    pods_per_second: float | None
    p99_cycle_seconds: float | None
    queues: Mapping[str, int]
    bound_total: int


def _sum(samples: Samples, name: str, **labels: str) -> float:
    return sum(
        value
        for (sample, pairs), value in samples.items()
        if sample == name and all((k, v) in pairs for k, v in labels.items())
    )


def _buckets(samples: Samples) -> dict[float, float]:
    """Cumulative counts by upper bound, summed over every series of the cycle histogram."""
    out: dict[float, float] = {}
    for (sample, pairs), value in samples.items():
        if sample != f"{CYCLE}_bucket":
            continue
        le = dict(pairs).get("le", "")
        bound = math.inf if le == "+Inf" else float(le)
        out[bound] = out.get(bound, 0.0) + value
    return out


def quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """`histogram_quantile(q, …)` over cumulative buckets: linear within the bucket that holds
    the q-th observation; the highest finite bound when it falls in +Inf; None when empty."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = q * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def health(current: Scrape, previous: Scrape | None = None) -> SchedulerHealth:
    now = current.samples
    queues = {dict(pairs).get("queue", ""): int(value) for (name, pairs), value in now.items() if name == PENDING}
    bound = _sum(now, BINDINGS, result="bound")
    buckets = _buckets(now)
    rate = None
    if previous is not None and current.at > previous.at:
        then = previous.samples
        rate = max(0.0, bound - _sum(then, BINDINGS, result="bound")) / (current.at - previous.at)
        earlier = _buckets(then)
        window = {b: c - earlier.get(b, 0.0) for b, c in buckets.items()}
        if window and max(window.values()) > 0:
            buckets = window
    return SchedulerHealth(
        pods_per_second=rate,
        p99_cycle_seconds=quantile(0.99, buckets),
        queues=dict(sorted(queues.items())),
        bound_total=int(bound),
    )
