"""Reclaim planning: who goes first, and that it stops as soon as used ≤ runtime."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.quotas.reclaim import Candidate, OveruseTimer, over, plan

GPU = "koordinator.sh/gpu-core"


def pod(key: str, priority: int = 0, created: str = "2026-01-01T00:00:00Z", gpu: int = 100, **kw: bool) -> Candidate:
    return Candidate(key, priority, created, {GPU: gpu}, **kw)


def test_over_only_in_limited_resources() -> None:
    assert over({GPU: 500, "cpu": 9000}, {GPU: 400}) == {GPU: 100}
    assert over({GPU: 400}, {GPU: 400}) == {}


def test_lowest_priority_then_newest_first_and_no_further_than_needed() -> None:
    pods = [
        pod("ns/old-low", 0, "2026-01-01T00:00:00Z"),
        pod("ns/new-low", 0, "2026-01-01T00:05:00Z"),
        pod("ns/high", 10, "2026-01-01T00:10:00Z"),
    ]
    chosen = plan({GPU: 500}, {GPU: 400}, pods)
    assert [v.key for v in chosen.victims] == ["ns/new-low"]
    assert chosen.used_after == {GPU: 400} and not chosen.still_over
    chosen = plan({GPU: 600}, {GPU: 400}, pods)
    assert [v.key for v in chosen.victims] == ["ns/new-low", "ns/old-low"]


def test_non_preemptible_pods_are_never_chosen() -> None:
    pods = [pod("ns/keep", 0, preemptible=False), pod("ns/go", 100)]
    chosen = plan({GPU: 600}, {GPU: 400}, pods)
    assert [v.key for v in chosen.victims] == ["ns/go"]
    assert chosen.still_over == {GPU: 100}


def test_pods_that_give_back_nothing_over_are_skipped() -> None:
    cpu_only = Candidate("ns/cpu", 0, "", {"cpu": 4000})
    chosen = plan({GPU: 500, "cpu": 4000}, {GPU: 400, "cpu": 8000}, [cpu_only, pod("ns/gpu", 5)])
    assert [v.key for v in chosen.victims] == ["ns/gpu"]


def test_nothing_when_within_runtime() -> None:
    assert plan({GPU: 400}, {GPU: 400}, [pod("ns/a")]).victims == ()


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 400), st.booleans()), max_size=12),
    st.integers(0, 2000),
)
def test_plan_stops_at_the_first_pod_that_brings_used_within_runtime(
    specs: list[tuple[int, int, bool]], runtime: int
) -> None:
    pods = [
        Candidate(f"ns/p{i}", prio, f"2026-01-01T00:{i:02d}:00Z", {GPU: g}, pre)
        for i, (prio, g, pre) in enumerate(specs)
    ]
    used = sum(g for _, g, _ in specs)
    chosen = plan({GPU: used}, {GPU: runtime}, pods)
    assert all(v.preemptible for v in chosen.victims)
    if chosen.victims:
        # Without the last victim the quota was still over: no pod is evicted beyond need.
        assert chosen.used_after[GPU] + chosen.victims[-1].request[GPU] > runtime
        priorities = [v.priority for v in chosen.victims]
        assert priorities == sorted(priorities)
    if not chosen.still_over:
        assert chosen.used_after.get(GPU, 0) <= runtime


def test_timer_counts_from_the_first_look_over_and_restarts_after_a_dip() -> None:
    timer = OveruseTimer(grace=120)
    assert timer.observe("q", False, 0.0) is None
    assert timer.observe("q", True, 10.0) == 120
    assert timer.observe("q", True, 100.0) == 30
    assert timer.observe("q", False, 110.0) is None
    assert timer.observe("q", True, 200.0) == 120
    assert timer.observe("q", True, 330.0) == -10
