"""Latency summaries for the `tessera bench` targets: percentiles of timed samples, in milliseconds."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Latencies"]


@dataclass(frozen=True, slots=True)
class Latencies:
    """Percentiles of one series of samples, in milliseconds."""

    count: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def of(cls, samples_s: Sequence[float]) -> Latencies:
        """Summarize durations given in seconds (at least two samples)."""
        if len(samples_s) < 2:
            raise ValueError("need at least two samples")
        cuts = statistics.quantiles(samples_s, n=100, method="inclusive")
        return cls(len(samples_s), cuts[49] * 1e3, cuts[89] * 1e3, cuts[98] * 1e3, max(samples_s) * 1e3)

    def row(self, label: str) -> str:
        return (
            f"{label:<28} n={self.count:<6} p50={self.p50_ms:7.3f} ms  p90={self.p90_ms:7.3f} ms  "
            f"p99={self.p99_ms:7.3f} ms  max={self.max_ms:7.3f} ms"
        )
