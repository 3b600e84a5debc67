"""Kubernetes amounts ↔ cgroup values: kubelet's and runc's reference numbers."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.qos import convert


@pytest.mark.parametrize(
    ("milli", "shares"),
    [(0, 2), (1, 2), (2, 2), (250, 256), (1000, 1024), (1500, 1536), (10**9, 262144)],
    ids=["zero", "one-milli", "two-milli", "quarter", "one-core", "1.5-cores", "huge"],
)
def test_milli_to_shares_is_kubelets(milli: int, shares: int) -> None:
    assert convert.milli_to_shares(milli) == shares


@pytest.mark.parametrize(
    ("shares", "weight"),
    [(2, 1), (1024, 39), (262144, 10000), (0, 1), (10**7, 10000)],
    ids=["min", "default", "max", "below-min-clamps", "above-max-clamps"],
)
def test_shares_to_weight_is_runcs_formula(shares: int, weight: int) -> None:
    assert convert.shares_to_weight(shares) == weight


def test_weight_to_shares_inverts_the_ends() -> None:
    assert convert.weight_to_shares(1) == 2
    assert convert.weight_to_shares(10000) == 262144
    assert convert.weight_to_shares(100) == 2598  # the v2 default weight


@given(st.integers(min_value=1, max_value=10000))
def test_weight_survives_a_round_trip_through_shares(weight: int) -> None:
    assert convert.shares_to_weight(convert.weight_to_shares(weight)) == weight


@given(st.integers(min_value=2, max_value=262144))
def test_shares_survive_a_round_trip_within_one_weight_step(shares: int) -> None:
    back = convert.weight_to_shares(convert.shares_to_weight(shares))
    assert convert.shares_to_weight(back) == convert.shares_to_weight(shares)
    assert 0 <= shares - back <= 27


@given(st.integers(min_value=2, max_value=262143))
def test_shares_to_weight_is_monotonic(shares: int) -> None:
    assert convert.shares_to_weight(shares) <= convert.shares_to_weight(shares + 1)


@pytest.mark.parametrize(
    ("milli", "period", "quota"),
    [(0, 100_000, -1), (500, 100_000, 50_000), (2000, 100_000, 200_000), (1, 100_000, 1000), (500, 50_000, 25_000)],
    ids=["no-limit", "half", "two-cores", "floor-1ms", "other-period"],
)
def test_milli_to_quota(milli: int, period: int, quota: int) -> None:
    assert convert.milli_to_quota(milli, period) == quota


def test_quota_to_milli() -> None:
    assert convert.quota_to_milli(50_000) == 500
    assert convert.quota_to_milli(-1) == convert.UNLIMITED


def test_page_floor_and_percent() -> None:
    assert convert.page_floor(1_000_001, 4096) == 999_424
    assert convert.page_floor(convert.UNLIMITED, 4096) == convert.UNLIMITED
    assert convert.percent_of(1000, 80) == 800
    assert convert.percent_of(999, 50) == 499
