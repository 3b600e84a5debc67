"""The scheduler's health from two scrapes: rate, p99 over the window, queue lengths."""

from __future__ import annotations

import math

import pytest

from dashboard import health
from dashboard.health import Scrape


def scrape(at: float, bound: float, buckets: dict[str, float], queues: dict[str, float]) -> Scrape:
    samples = {(health.BINDINGS, (("result", "bound"),)): bound, (health.BINDINGS, (("result", "failed"),)): 7.0}
    for le, count in buckets.items():
        samples[(f"{health.CYCLE}_bucket", (("le", le), ("profile", "p"), ("result", "scheduled")))] = count
    for queue, n in queues.items():
        samples[(health.PENDING, (("queue", queue),))] = n
    return Scrape(at, samples)


def test_one_scrape_gives_lifetime_p99_and_no_rate() -> None:
    h = health.health(scrape(10.0, 50, {"0.001": 90, "0.01": 100, "+Inf": 100}, {"active": 2, "backoff": 1}))
    assert h.pods_per_second is None
    assert h.p99_cycle_seconds == pytest.approx(0.0091)
    assert h.queues == {"active": 2, "backoff": 1}
    assert h.bound_total == 50


def test_two_scrapes_give_the_rate_and_the_p99_of_the_window() -> None:
    before = scrape(0.0, 50, {"0.001": 100, "0.01": 100, "+Inf": 100}, {})
    after = scrape(10.0, 150, {"0.001": 100, "0.01": 200, "+Inf": 200}, {})
    h = health.health(after, before)
    assert h.pods_per_second == pytest.approx(10.0)
    assert 0.001 < (h.p99_cycle_seconds or 0) <= 0.01  # only the window's slow cycles count


def test_quantile_edges() -> None:
    assert health.quantile(0.99, {}) is None
    assert health.quantile(0.99, {0.1: 0, math.inf: 0}) is None
    assert health.quantile(0.99, {0.1: 0, math.inf: 5}) == 0.1  # beyond the last finite bound
    assert health.quantile(0.5, {0.1: 10, 0.2: 10, math.inf: 10}) == pytest.approx(0.05)
