"""The runtime partition: worked cases for each rule of the protocol, and its properties."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apis.quota.runtime import Claim, partition, split_by_weight


def test_blog_example_min_then_weights_then_redistribution() -> None:
    # Koordinator's worked example: 100 CPUs; A lends 5 of its min 10; B, C, D share by weight
    # 60/50/80; B caps at its request 20 and what it does not need goes to C and D.
    claims = [Claim("A", 10, 5, 10), Claim("B", 15, 20, 60), Claim("C", 20, 40, 50), Claim("D", 15, 70, 80)]
    assert partition(100, claims) == {"A": 5, "B": 20, "C": 35, "D": 40}


def test_capped_child_gives_back_what_it_does_not_need() -> None:
    claims = [Claim("A", 10, 5, 10), Claim("B", 15, 20, 60), Claim("C", 20, 30, 50), Claim("D", 15, 70, 80)]
    assert partition(100, claims) == {"A": 5, "B": 20, "C": 30, "D": 45}


def test_request_below_min_gets_request_only() -> None:
    assert partition(100, [Claim("a", 50, 10, 1), Claim("b", 50, 200, 1)]) == {"a": 10, "b": 90}


def test_mins_scale_down_when_they_exceed_the_total() -> None:
    # Σmin 150 on a total of 60: mins become 40 and 20.
    assert partition(60, [Claim("a", 100, 100, 1), Claim("b", 50, 100, 1)]) == {"a": 40, "b": 20}


def test_largest_remainder_ties_by_name() -> None:
    assert split_by_weight(1, [("b", 1), ("a", 1)]) == {"a": 1, "b": 0}
    assert split_by_weight(10, [("x", 1), ("y", 2)]) == {"x": 3, "y": 7}


def test_zero_weight_borrows_nothing() -> None:
    assert partition(100, [Claim("a", 10, 100, 0), Claim("b", 0, 100, 1)]) == {"a": 10, "b": 90}


claim_lists = st.lists(
    st.builds(
        Claim,
        name=st.text("abcdefgh", min_size=1, max_size=3),
        min=st.integers(0, 1000),
        request=st.integers(0, 2000),
        weight=st.integers(1, 100),
    ),
    max_size=8,
    unique_by=lambda c: c.name,
)


@given(st.integers(0, 5000), claim_lists, st.sampled_from([1, 100]))
def test_properties(total: int, claims: list[Claim], unit: int) -> None:
    result = partition(total, claims, unit)
    assert sum(result.values()) <= total
    for c in claims:
        assert isinstance(result[c.name], int)
        assert 0 <= result[c.name] <= c.request
    if sum(c.min for c in claims) <= total:
        for c in claims:
            assert result[c.name] >= min(c.request, c.min)
    # Work-conserving: idle capacity is never left while someone (with weight) still asks.
    if sum(result.values()) < total:
        assert all(result[c.name] == c.request for c in claims)
    assert partition(total, list(reversed(claims)), unit) == result


def test_koordinator_integer_distribution_loses_no_gpu_to_rounding() -> None:
    # Koordinator's runtime_quota_calculator_test.go: a parent of 81 GPUs fully partitioned by
    # min; a donor (min 3, request 0) lends its 3 to ten equal borrowers (mins 8 x8, 7 x2,
    # request 100 each). In whole GPUs (percent, split in units of 100): nothing is lost, the
    # donor keeps nothing, each borrower at least its min, and every runtime is whole GPUs.
    gpu = 100
    mins = [8] * 8 + [7] * 2
    claims = [Claim("donor", 3 * gpu, 0, 1)]
    claims += [Claim(f"borrower-{i:02d}", m * gpu, 100 * gpu, 1) for i, m in enumerate(mins)]
    result = partition(81 * gpu, claims, unit=gpu)
    assert sum(result.values()) == 81 * gpu
    assert result["donor"] == 0
    for i, m in enumerate(mins):
        assert result[f"borrower-{i:02d}"] >= m * gpu
    assert all(share % gpu == 0 for share in result.values())
    # The three lent GPUs go whole to three borrowers (largest remainder, ties by name), not
    # 30 % of a GPU to each of ten, which no whole-GPU pod could use.
    assert [n for n, share in sorted(result.items()) if n != "donor" and share > mins[int(n[-2:])] * gpu] == [
        "borrower-00",
        "borrower-01",
        "borrower-02",
    ]


def test_less_than_a_device_goes_whole_to_one_child() -> None:
    assert split_by_weight(250, [("a", 1), ("b", 1), ("c", 1)], unit=100) == {"a": 100, "b": 100, "c": 50}
    assert split_by_weight(50, [("a", 1), ("b", 1)], unit=100) == {"a": 50, "b": 0}
    # A child that needs less than a whole device gives the rest back to the others.
    assert partition(300, [Claim("a", 0, 30, 1), Claim("b", 0, 500, 1)], unit=100) == {"a": 30, "b": 270}


@given(
    st.integers(0, 50),
    st.lists(
        st.tuples(
            st.text("abcdefgh", min_size=1, max_size=3), st.integers(0, 10), st.integers(0, 20), st.integers(1, 9)
        ),
        max_size=8,
        unique_by=lambda c: c[0],
    ),
)
def test_a_tree_in_whole_devices_keeps_whole_runtimes(devices: int, raw: list[tuple[str, int, int, int]]) -> None:
    claims = [Claim(name, low * 100, request * 100, weight) for name, low, request, weight in raw]
    result = partition(devices * 100, claims, unit=100)
    assert all(share % 100 == 0 for share in result.values())
    if sum(c.request for c in claims) >= devices * 100:
        assert sum(result.values()) == devices * 100  # none lost to rounding


def reference_partition(total: int, claims: list[Claim], unit: int = 1) -> dict[str, int]:
    """The rules stated plainly, one dict per step (the first implementation, kept as the oracle
    for the list-based one the tree runs)."""
    total = max(total, 0)
    mins = {c.name: max(c.min, 0) for c in claims}
    if sum(mins.values()) > total:
        step = unit if all(m % unit == 0 for m in mins.values()) else 1
        mins = split_by_weight(total, mins.items(), step) | {n: 0 for n, m in mins.items() if m <= 0}
    runtime = {c.name: min(max(c.request, 0), mins[c.name]) for c in claims}
    left = total - sum(runtime.values())
    hungry = {c.name: c for c in claims if c.request > runtime[c.name] and c.weight > 0}
    while left > 0 and hungry:
        shares = split_by_weight(left, ((n, c.weight) for n, c in hungry.items()), unit)
        left = 0
        for name, share in shares.items():
            taken = min(share, hungry[name].request - runtime[name])
            runtime[name] += taken
            left += share - taken
            if runtime[name] >= hungry[name].request:
                del hungry[name]
    return runtime


@given(
    st.integers(0, 5000),
    st.lists(
        st.builds(
            Claim,
            name=st.text("abcdefgh", min_size=1, max_size=3),
            min=st.integers(0, 1000),
            request=st.integers(0, 2000),
            weight=st.integers(0, 100),
        ),
        max_size=12,
        unique_by=lambda c: c.name,
    ),
    st.sampled_from([1, 100]),
)
def test_equals_the_plain_statement_of_the_rules(total: int, claims: list[Claim], unit: int) -> None:
    assert partition(total, claims, unit) == reference_partition(total, claims, unit)
