"""Quota invariants, recomputed with apis.quota from pods, quotas and nodes."""

from __future__ import annotations

from apis.extension import names
from cli.bench.soak.invariants.quotas import runtime_over_max, status_used, used_over_max
from tests.unit.cli.bench.soak.builders import HALF, pod, quota, state

HALF_REQUEST = {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}
LIMIT = {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100"}


def _pods(bound: int, pending: int = 0) -> list:  # type: ignore[type-arg]
    placed = [pod(f"p{i}", HALF_REQUEST, node_name="n1", gpus={i: HALF}, namespace="team") for i in range(bound)]
    return placed + [pod(f"w{i}", HALF_REQUEST, namespace="team") for i in range(pending)]


def test_bound_pods_within_max_are_fine_however_many_wait() -> None:
    good = state(_pods(bound=2, pending=5), quotas=(quota("team", LIMIT),))
    assert used_over_max(good) == runtime_over_max(good) == status_used(good) == []


def test_bound_pods_beyond_max_name_the_quota_and_its_pods() -> None:
    [violation] = used_over_max(state(_pods(bound=3), quotas=(quota("team", LIMIT),)))
    assert violation.objects == ("quota team", "team/p0", "team/p1", "team/p2")
    assert "150 > 100" in violation.message


def test_a_status_used_that_differs_from_the_pods_is_reported_and_none_is_not_judged() -> None:
    written = {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}
    [violation] = status_used(state(_pods(bound=2), quotas=(quota("team", LIMIT, used=written),)))
    assert violation.objects == ("quota team",)
    right = {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100"}
    assert status_used(state(_pods(bound=2), quotas=(quota("team", LIMIT, used=right),))) == []


def test_without_quotas_nothing_is_judged() -> None:
    assert used_over_max(state(_pods(bound=9))) == []
