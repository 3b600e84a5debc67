"""Retry delays: per-key exponential backoff, an overall token bucket, and their combination."""

from collections.abc import Callable

import pytest

from controller.runtime.ratelimit import ItemBackoff, MaxOf, RateLimiterSettings, TokenBucket
from tests.support.clocks import FakeClock


def test_item_backoff_doubles_per_failure_up_to_the_cap() -> None:
    backoff = ItemBackoff(base=0.01, maximum=0.1)
    assert [backoff.when("a") for _ in range(6)] == [0.01, 0.02, 0.04, 0.08, 0.1, 0.1]
    assert backoff.failures("a") == 6


def test_item_backoff_is_per_key_and_forget_starts_over() -> None:
    backoff = ItemBackoff(base=1.0, maximum=100.0)
    backoff.when("a")
    backoff.when("a")
    assert backoff.when("b") == 1.0
    backoff.forget("a")
    assert backoff.failures("a") == 0
    assert backoff.when("a") == 1.0


def test_item_backoff_survives_very_many_failures() -> None:
    backoff = ItemBackoff(base=0.005, maximum=300.0)
    for _ in range(2000):
        delay = backoff.when("a")
    assert delay == 300.0


def test_token_bucket_allows_a_burst_then_spaces_tries_by_qps(clock: FakeClock) -> None:
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.when(k) for k in "abc"] == [0.0, 0.0, 0.0]
    assert bucket.when("d") == pytest.approx(0.1)
    assert bucket.when("e") == pytest.approx(0.2)  # reservations queue up behind each other
    clock.advance(10)
    assert bucket.when("f") == 0.0  # refilled (to the burst size, not beyond)
    assert [bucket.when(k) for k in "gh"] == [0.0, 0.0]
    assert bucket.when("i") == pytest.approx(0.1)


def test_max_of_takes_the_longest_wait(clock: FakeClock) -> None:
    limiter = MaxOf(ItemBackoff(base=0.001, maximum=10.0), TokenBucket(qps=1, burst=1, clock=clock))
    assert limiter.when("a") == 0.001  # backoff alone
    assert limiter.when("b") == pytest.approx(1.0)  # the bucket is empty: it dominates
    assert limiter.failures("a") == 1
    limiter.forget("a")
    assert limiter.failures("a") == 0


def test_default_settings_build_a_working_limiter(clock: FakeClock) -> None:
    limiter = RateLimiterSettings().build(clock)
    assert limiter.when("a") == 0.005
    assert limiter.when("a") == 0.01


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ItemBackoff(base=0, maximum=1), "base"),
        (lambda: ItemBackoff(base=2, maximum=1), "base"),
        (lambda: TokenBucket(qps=0, burst=1), "qps"),
        (lambda: TokenBucket(qps=1, burst=0), "burst"),
        (MaxOf, "at least one"),
    ],
    ids=["zero-base", "base-above-max", "zero-qps", "zero-burst", "no-limiters"],
)
def test_bad_parameters_are_refused(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()
