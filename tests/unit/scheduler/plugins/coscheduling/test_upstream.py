"""Coscheduling with scheduler-plugins' PodGroups (`scheduling.x-k8s.io`), on the offline core:
all or nothing with that project's semantics, the minResources pre-check, and pods that name both
kinds of gang."""

from __future__ import annotations

from typing import Any

import pytest

from apis.crds.podgroup import PodGroup
from apis.extension import names
from apis.k8s.core import Pod
from scheduler.cache import PodInfo
from scheduler.core import Scheduler
from scheduler.framework.config import load_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.plugins.coscheduling.args import CoschedulingArgs
from tests.support.builders import bound_pod, gpu_alloc, make_node, make_pod
from tests.support.scheduling import make_scheduler, state_of

from .gangs import FOREVER, nodes_of, plugin, schedule_all


def upstream_group(name: str = "job", *, min_member: int = 4, **spec: Any) -> PodGroup:
    return PodGroup.upstream_from_dict(
        {"metadata": {"name": name, "namespace": "ml"}, "spec": {"minMember": min_member, **spec}}
    )


def rank(name: str, group: str = "job", *, gpus: int = 2, **labels: str) -> Pod:
    """A pod labelled as Kubeflow's training operator labels its replicas, asking whole GPUs."""
    return make_pod(name, namespace="ml", labels={names.LABEL_UPSTREAM_POD_GROUP: group, **labels}, nvidia_gpu=gpus)


def filler(node: str, gpus: int) -> Pod:
    """Another team's pod bound on `node`, holding its first `gpus` GPUs."""
    return bound_pod(f"filler-{node}", node, *(gpu_alloc(m) for m in range(gpus)), nvidia_gpu=gpus)


def gpus_free_per_node(scheduler: Scheduler, free: int) -> None:
    """Bound pods leave `free` GPUs on every node."""
    for node in scheduler.cache.nodes():
        scheduler.cache.add_pod(filler(node.name, 8 - free))


def test_four_two_gpu_ranks_with_room_for_three_are_placed_all_or_nothing() -> None:
    """The issue's case: minMember 4, four 2-GPU pods, room for three: none is placed, and every
    device taken while they waited is given back."""
    scheduler = make_scheduler(make_node("n1"), make_node("n2"), make_node("n3"))
    gpus_free_per_node(scheduler, 2)
    scheduler.observe_pod_group(upstream_group())
    before = state_of(scheduler.cache)
    out = schedule_all(scheduler, [rank(f"job-{i}") for i in range(4)], now=FOREVER)
    assert nodes_of(out) == dict.fromkeys((f"ml/job-{i}" for i in range(4)), None)
    assert state_of(scheduler.cache) == before
    assert any("gang ml/job rejected: member ml/job-3 unschedulable" in o.status.message for o in out.values())
    # Room for the fourth: the whole gang is placed, two GPUs each (once the members turned away
    # in the failed cycle were each tried again, as the live queue retries them).
    scheduler.cache.remove_pod(filler("n3", 6))
    for _ in range(3):
        out = schedule_all(scheduler, [rank(f"job-{i}") for i in range(4)])
        if all(o.scheduled for o in out.values()):
            break
    assert all(o.scheduled for o in out.values()), {p: o.status.message for p, o in out.items()}


def test_members_wait_until_min_are_waiting_or_bound_and_for_its_timeout() -> None:
    scheduler = make_scheduler(make_node("n1"), make_node("n2"))
    scheduler.observe_pod_group(upstream_group(min_member=2, scheduleTimeoutSeconds=7))
    pods = [rank("job-0"), rank("job-1")]
    for pod in pods:
        scheduler.observe_pod(pod)
    status = scheduler.schedule_one(pods[0]).status
    assert status.code is Code.WAIT and status.timeout == pytest.approx(7.0)
    assert scheduler.schedule_one(pods[1]).scheduled
    assert [o.pod for o in scheduler.resolve_waiting() if o.scheduled] == ["ml/job-0"]
    summary = plugin(scheduler).gang_summary("ml/job")
    assert summary is not None and (summary.mode, summary.match_policy) == ("Strict", "waiting-and-running")


def test_without_a_timeout_members_wait_permit_waiting_time_seconds() -> None:
    """scheduler-plugins' default (60 s), or its `permitWaitingTimeSeconds` argument — not
    Koordinator's 600 s, which its own gangs keep."""
    for args, expected in (("", 60.0), ("permitWaitingTimeSeconds: 20", 20.0), ("permitWaitingTimeSeconds: 0", 60.0)):
        config = f"profiles: [{{pluginConfig: [{{name: Coscheduling, args: {{{args}}}}}]}}]"
        scheduler = make_scheduler(make_node("n1"), config=load_config(config))
        scheduler.observe_pod_group(upstream_group(min_member=2))
        pods = [rank("job-0"), rank("job-1")]
        for pod in pods:
            scheduler.observe_pod(pod)
        assert scheduler.schedule_one(pods[0]).status.timeout == pytest.approx(expected)


@pytest.mark.parametrize("bad", [-1, 1.5, "60", True])
def test_permit_waiting_time_seconds_must_be_a_whole_number(bad: object) -> None:
    from apis.errors import ConfigError

    with pytest.raises(ConfigError, match="permitWaitingTimeSeconds: must be a whole number ≥ 0"):
        CoschedulingArgs.from_dict({"permitWaitingTimeSeconds": bad})


def test_a_missing_pod_group_or_too_few_pods_is_unresolvable_with_the_reason() -> None:
    scheduler = make_scheduler(make_node("n1"), make_node("n2"))
    pods = [rank(f"job-{i}") for i in range(3)]
    out = schedule_all(scheduler, pods)
    status = out["ml/job-0"].status
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "gang ml/job: PodGroup ml/job of scheduling.x-k8s.io not found" in status.message
    scheduler.observe_pod_group(upstream_group())
    out = schedule_all(scheduler, pods)
    assert "gang ml/job: 3 of 4 members created, min 4" in out["ml/job-0"].status.message


def test_min_resources_that_the_cluster_cannot_hold_start_no_member() -> None:
    """scheduler-plugins' cluster-wide pre-check: the ranks would each fit (and three could wait
    at Permit, holding GPUs), but the declared minimum does not fit what is free, so none is
    tried. Whole GPUs are compared as the GPU resources nodes publish."""
    scheduler = make_scheduler(make_node("n1"), make_node("n2"), make_node("n3"))
    gpus_free_per_node(scheduler, 2)
    scheduler.observe_pod_group(upstream_group(minResources={names.NVIDIA_GPU: "8"}))
    before = state_of(scheduler.cache)
    out = schedule_all(scheduler, [rank(f"job-{i}") for i in range(4)])
    status = out["ml/job-0"].status
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert (
        "gang ml/job: its PodGroup's minResources do not fit in the cluster's free resources: "
        "koordinator.sh/gpu-core needs 800, 600 free; koordinator.sh/gpu-memory-ratio needs 800, 600 free"
    ) in status.message
    assert state_of(scheduler.cache) == before and scheduler.cycle.waiting == 0
    summary = plugin(scheduler).gang_summary("ml/job")
    assert summary is not None and "minResources do not fit" in summary.reason


def test_min_resources_that_fit_let_the_gang_through_and_its_own_pods_count_as_free() -> None:
    scheduler = make_scheduler(make_node("n1"), make_node("n2"))
    scheduler.observe_pod_group(upstream_group(min_member=2, minResources={names.NVIDIA_GPU: "16", "cpu": "0"}))
    pods = [rank("job-0", gpus=8), rank("job-1", gpus=8)]
    for pod in pods:
        scheduler.observe_pod(pod)
    # job-0 waits at Permit holding 8 GPUs: the 16 asked still fit, its own 8 counted free.
    assert scheduler.schedule_one(pods[0]).status.code is Code.WAIT
    assert scheduler.schedule_one(pods[1]).scheduled
    assert [o.pod for o in scheduler.resolve_waiting() if o.scheduled] == ["ml/job-0"]


@pytest.mark.parametrize(
    ("min_resources", "short"),
    [
        ({"example.com/foo": "1"}, "example.com/foo needs 1, 0 free"),
        ({"cpu": "1000"}, "cpu needs 1k, "),
    ],
    ids=["a-resource-no-node-has", "more-cpu-than-the-cluster"],
)
def test_min_resources_name_what_is_short(min_resources: dict[str, str], short: str) -> None:
    scheduler = make_scheduler(make_node("n1"))
    scheduler.observe_pod_group(upstream_group(min_member=1, minResources=min_resources))
    out = schedule_all(scheduler, [rank("job-0")])
    assert short in out["ml/job-0"].status.message


def test_koordinators_pod_group_ignores_min_resources_as_koordinator_does() -> None:
    scheduler = make_scheduler(make_node("n1"))
    scheduler.observe_pod_group(
        PodGroup.from_dict(
            {"metadata": {"name": "job", "namespace": "ml"}, "spec": {"minMember": 1, "minResources": {"cpu": "1000"}}}
        )
    )
    out = schedule_all(scheduler, [make_pod("job-0", namespace="ml", labels={names.LABEL_POD_GROUP: "job"})])
    assert out["ml/job-0"].scheduled


def test_a_pod_naming_both_kinds_of_gang_is_refused_with_the_reason() -> None:
    scheduler = make_scheduler(make_node("n1"))
    scheduler.observe_pod_group(upstream_group(min_member=1))
    both = rank("job-0", **{names.LABEL_POD_GROUP: "job"})
    out = schedule_all(scheduler, [both])
    status = out["ml/job-0"].status
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    # Only a fix of the pod's labels helps: retried when the pod changes, as explain says.
    assert plugin(scheduler).pre_filter(CycleState(), PodInfo.of(both))[1].pod_must_change
    assert (
        "pod ml/job-0 names two kinds of gang: pod-group.scheduling.sigs.k8s.io=job (Koordinator's) and "
        "scheduling.x-k8s.io/pod-group=job (scheduler-plugins' PodGroup); keep one of them"
    ) in status.message
    # It counts in no gang: the PodGroup's gang has no member.
    summary = plugin(scheduler).gang_summary("ml/job")
    assert summary is not None and summary.created == 0


def test_pod_groups_of_both_groups_under_one_name_make_the_gang_ambiguous() -> None:
    scheduler = make_scheduler(make_node("n1"))
    koordinator = PodGroup.from_dict({"metadata": {"name": "job", "namespace": "ml"}, "spec": {"minMember": 1}})
    scheduler.observe_pod_group(upstream_group(min_member=1))
    scheduler.observe_pod_group(koordinator)
    out = schedule_all(scheduler, [rank("job-0")])
    assert (
        "gang ml/job: a PodGroup ml/job exists in both scheduling.sigs.k8s.io and scheduling.x-k8s.io; rename one"
        in out["ml/job-0"].status.message
    )
    scheduler.forget_pod_group(koordinator)
    assert schedule_all(scheduler, [rank("job-0")])["ml/job-0"].scheduled


def test_the_members_kind_decides_which_pod_group_describes_the_gang() -> None:
    """A Koordinator PodGroup seen first, then members naming a scheduler-plugins one of the same
    name: they wait for theirs, not the other's min."""
    scheduler = make_scheduler(make_node("n1"))
    scheduler.observe_pod_group(
        PodGroup.from_dict({"metadata": {"name": "job", "namespace": "ml"}, "spec": {"minMember": 1}})
    )
    scheduler.forget_pod_group(
        PodGroup.from_dict({"metadata": {"name": "job", "namespace": "ml"}, "spec": {"minMember": 1}})
    )
    scheduler.observe_pod_group(upstream_group(min_member=2))
    out = schedule_all(scheduler, [rank("job-0", gpus=1)])
    assert "gang ml/job: 1 of 2 members created, min 2" in out["ml/job-0"].status.message


def test_a_member_failing_after_the_quorum_is_placed_rejects_nobody() -> None:
    """scheduler-plugins' PostFilter: with min members waiting or bound, a further member that
    fits nowhere leaves them be."""
    scheduler = make_scheduler(make_node("n1"))
    scheduler.observe_pod_group(upstream_group(min_member=2))
    pods = [rank("job-0", gpus=4), rank("job-1", gpus=4), rank("job-2", gpus=4)]
    out = schedule_all(scheduler, pods)
    assert out["ml/job-0"].scheduled and out["ml/job-1"].scheduled
    assert out["ml/job-2"].status.code is Code.UNSCHEDULABLE
    assert "rejected" not in out["ml/job-2"].status.message
