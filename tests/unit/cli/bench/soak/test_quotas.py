"""Quota invariants, recomputed with apis.quota from pods, quotas and nodes."""

from __future__ import annotations

from apis.extension import names
from cli.bench.soak.invariants.liveness import lost
from cli.bench.soak.invariants.quotas import (
    over_runtime,
    reclaim_without_overuse,
    runtime_over_max,
    status_used,
    used_over_max,
)
from cli.bench.soak.observe import Record, _reclaimed
from cli.bench.soak.state import Reclaimed
from tests.unit.cli.bench.soak.builders import HALF, NOW, pod, quota, state

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


# --- reclaim: no eviction unless the quota was over its from-scratch runtime all its grace -------------
def test_over_runtime_is_computed_from_scratch() -> None:
    busy = state(_pods(bound=3), quotas=(quota("team", {names.GPU_CORE: "400", names.GPU_MEMORY_RATIO: "400"}),))
    assert over_runtime(busy.quotas, busy.nodes, busy.pods) == set()  # borrows idle GPUs: within runtime
    # Pods outside every quota take the whole node: the root's total falls to what is left, the
    # team's runtime with it, and its 150 are over.
    outside = [pod(f"o{i}", {names.NVIDIA_GPU: "1"}, node_name="n1", namespace="other") for i in range(7)]
    crowded = state(_pods(bound=3) + outside, quotas=busy.quotas)
    assert over_runtime(crowded.quotas, crowded.nodes, crowded.pods) == {"team"}


JUDGE = reclaim_without_overuse(30.0, 6.0)


def test_an_eviction_after_a_whole_grace_of_overuse_is_fine() -> None:
    evicted = Reclaimed("team/p2", "team", NOW - 5)
    fine = state(reclaimed=(evicted,), overuse={"team": ((NOW - 40, NOW - 2),)})
    assert JUDGE(fine) == []
    still = state(reclaimed=(evicted,), overuse={"team": ((NOW - 33, None),)})  # first seen within the slack
    assert JUDGE(still) == []


def test_an_eviction_without_a_whole_grace_of_overuse_is_a_violation() -> None:
    evicted = Reclaimed("team/p2", "team", NOW - 5)
    too_soon = state(reclaimed=(evicted,), overuse={"team": ((NOW - 20, None),)})
    [violation] = JUDGE(too_soon)
    assert violation.objects == ("quota team", "team/p2")
    assert "was not seen over its runtime (from scratch) for the 30s before it" in violation.message
    dipped = state(reclaimed=(evicted,), overuse={"team": ((NOW - 60, NOW - 30), (NOW - 20, None))})
    assert len(JUDGE(dipped)) == 1  # a dip below restarts the grace
    assert "seen over: never" in JUDGE(state(reclaimed=(evicted,)))[0].message


def test_the_record_keeps_stretches_of_overuse() -> None:
    record = Record()
    record.saw_overuse({"a"}, 10.0)
    record.saw_overuse({"a", "b"}, 13.0)
    record.saw_overuse({"b"}, 16.0)
    record.saw_overuse({"a"}, 19.0)
    assert record.state(20.0, {}).overuse == {"a": ((10.0, 16.0), (19.0, None)), "b": ((13.0, 19.0),)}


def test_a_pod_reclaim_evicted_is_no_lost_object() -> None:
    gone = state(acknowledged={"team/p2": "uid-p2"}, reclaimed=(Reclaimed("team/p2", "team", NOW - 5),))
    assert lost(gone) == []
    assert len(lost(state(acknowledged={"team/p2": "uid-p2"}))) == 1


def test_reclaim_events_are_read_with_their_quota_and_time() -> None:
    event = {
        "reason": "ReclaimedByQuota",
        "involvedObject": {"kind": "Pod", "namespace": "soak-borrow", "name": "quota-7"},
        "message": "evicted: quota soak-borrow/soak-borrow used {koordinator.sh/gpu-core: 300} above its runtime …",
        "firstTimestamp": "2026-01-01T00:00:10Z",
    }
    [reclaimed] = _reclaimed([event, {"message": "something else", "firstTimestamp": "2026-01-01T00:00:10Z"}])
    assert (reclaimed.pod, reclaimed.quota) == ("soak-borrow/quota-7", "soak-borrow")
    assert reclaimed.at == 1767225610.0
