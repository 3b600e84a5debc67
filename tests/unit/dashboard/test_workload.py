"""Pending pods (oldest first, with the scheduler's word), gangs, and the quota tree."""

from __future__ import annotations

import dataclasses

from apis.crds.podgroup import PodGroup, PodGroupPhase
from apis.extension import names
from apis.k8s.meta import Condition, ObjectMeta
from dashboard import workload
from dashboard.explanation import Step
from dashboard.workload import SchedulerView
from tests.support.gpuobjects import NOW, make_pod, make_quota


def gang(name: str, members: int) -> dict[str, str]:
    return {names.ANNOTATION_GANG_NAME: name, names.ANNOTATION_GANG_MIN_AVAILABLE: str(members)}


def test_pending_pods_oldest_first_with_the_schedulers_view() -> None:
    pods = [
        make_pod("young", created="2026-11-24T17:59:50Z", requests={names.GPU_CORE: 50, names.GPU_MEMORY_RATIO: 50}),
        make_pod("old", created="2026-11-24T17:00:00Z", requests={names.NVIDIA_GPU: 2}),
        make_pod("bound", node="n1"),
    ]
    steps = (Step("devices", "DeviceShare", "3 nodes: Insufficient gpu devices"),)
    view = {"default/old": SchedulerView(queue="unschedulable", attempts=3, message="0/3 nodes", steps=steps)}
    pending = workload.pending(pods, now=NOW, scheduler=view)
    assert [p.pod for p in pending] == ["default/old", "default/young"]
    old, young = pending
    assert (old.age_seconds, old.asks, old.queue, old.attempts, old.steps) == (
        3600.0,
        "nvidia.com/gpu=2",
        "unschedulable",
        3,
        steps,
    )
    assert (young.age_seconds, young.asks, young.queue) == (10.0, "gpu-core=50 gpu-memory-ratio=50", "")


def test_a_gang_member_that_fits_alone_is_held_by_its_gang() -> None:
    fits = Step("nodes", "", "2/2 nodes fit the pod now")
    pods = [make_pod("big-0", annotations=gang("big", 4)), make_pod("solo")]
    view = {key: SchedulerView(steps=(fits,), fits=True) for key in ("default/big-0", "default/solo")}
    by_pod = {p.pod: p.steps for p in workload.pending(pods, now=NOW, scheduler=view)}
    assert by_pod["default/big-0"] == (
        Step("gang", "Coscheduling", "fits on its own; waits for the rest of gang default/big"),
        fits,
    )
    assert by_pod["default/solo"] == (fits,)


def test_a_pending_pods_own_message_stands_in_without_a_scheduler() -> None:
    pod = dataclasses.replace(make_pod("p"), conditions=(Condition("PodScheduled", "False", message="0/1 nodes"),))
    assert workload.pending([pod], now=NOW, scheduler={})[0].message == "0/1 nodes"


def test_gangs_count_bound_and_waiting_members_and_how_long_they_wait() -> None:
    pods = [
        make_pod("big-0", annotations=gang("big", 3), created="2026-11-24T17:58:00Z"),
        make_pod("big-1", annotations=gang("big", 3), node="n1"),
        make_pod("big-2", annotations=gang("big", 3), created="2026-11-24T17:59:00Z"),
        make_pod("ddp-0", annotations=gang("ddp", 1), node="n1"),
        make_pod("solo"),
    ]
    group = PodGroup(ObjectMeta(name="pg", namespace="default"), min_member=5, phase=PodGroupPhase.PENDING)
    gangs = {g.name: g for g in workload.gangs(pods, [group], now=NOW)}
    assert set(gangs) == {"default/big", "default/ddp", "default/pg"}
    big = gangs["default/big"]
    assert (big.min_member, big.bound, big.waiting, big.waiting_seconds, big.phase) == (3, 1, 2, 120.0, "")
    assert (gangs["default/ddp"].waiting, gangs["default/ddp"].waiting_seconds) == (0, 0.0)
    assert (gangs["default/pg"].min_member, gangs["default/pg"].phase) == (5, PodGroupPhase.PENDING.value)


def test_the_quota_tree_in_depth_first_order_with_what_the_controller_wrote() -> None:
    parent_label = {names.LABEL_QUOTA_IS_PARENT: "true"}
    quotas = [
        make_quota(
            "team-b",
            min={names.GPU_CORE: 100},
            max={names.GPU_CORE: 400},
            labels={names.LABEL_QUOTA_PARENT: "org"},
            annotations={names.ANNOTATION_QUOTA_RUNTIME: '{"koordinator.sh/gpu-core":"300"}'},
            used={names.GPU_CORE: 250},
        ),
        make_quota("org", min={names.GPU_CORE: 800}, max={names.GPU_CORE: 800}, labels=parent_label),
        make_quota("team-a", max={names.GPU_CORE: 400}, labels={names.LABEL_QUOTA_PARENT: "org"}),
        make_quota(
            "loose",
            annotations={
                names.ANNOTATION_QUOTA_ALLOCATED: '{"koordinator.sh/gpu-core":"50"}',
                names.ANNOTATION_QUOTA_RUNTIME: "not json",
            },
        ),
    ]
    tree = workload.quota_tree(quotas)
    assert [(q.name, q.depth, q.parent) for q in tree] == [
        ("default/loose", 0, ""),
        ("default/org", 0, ""),
        ("default/team-a", 1, "org"),
        ("default/team-b", 1, "org"),
    ]
    loose, org, team_a, team_b = tree
    assert org.is_parent and not team_a.is_parent
    assert (team_b.runtime, team_b.used) == ({names.GPU_CORE: 300}, {names.GPU_CORE: 250})
    assert (team_a.runtime, team_a.used) == (None, None)
    assert loose.used == {names.GPU_CORE: 50} and loose.runtime is None
    assert len(loose.problems) == 1 and names.ANNOTATION_QUOTA_RUNTIME in loose.problems[0]


def test_a_quota_in_whole_gpus_shows_its_limits_as_its_runtime_is_counted() -> None:
    [node] = workload.quota_tree([make_quota("gpus", min={names.NVIDIA_GPU: 1}, max={names.NVIDIA_GPU: 4})])
    assert node.max == {names.GPU_CORE: 400, names.GPU_MEMORY_RATIO: 400}
    assert node.min == {names.GPU_CORE: 100, names.GPU_MEMORY_RATIO: 100}


def test_a_cycle_in_quota_parents_ends() -> None:
    quotas = [
        make_quota("a", labels={names.LABEL_QUOTA_PARENT: "b"}),
        make_quota("b", labels={names.LABEL_QUOTA_PARENT: "a"}),
    ]
    tree = workload.quota_tree(quotas)  # neither is a root: both are still drawn, and nothing hangs
    assert [(q.name, q.depth) for q in tree] == [("default/a", 0), ("default/b", 1)]


def test_ages_of_unreadable_timestamps_are_zero() -> None:
    assert workload.age_seconds("", NOW) == 0.0
    assert workload.age_seconds("yesterday", NOW) == 0.0
    assert workload.age_seconds("2026-11-24T17:59:30Z", NOW) == 30.0
