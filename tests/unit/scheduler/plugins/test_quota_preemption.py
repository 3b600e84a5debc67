"""ElasticQuota's PostFilter through the offline Scheduler: victims inside the pod's own quota,
by priority, never non-preemptible ones, the node where the fewest and lowest go, nothing for a
pod that could not fit anyway, and the nominated pod's room kept while its victims leave."""

from __future__ import annotations

import dataclasses

from apis.extension import names
from apis.k8s.core import Pod
from scheduler.cache import PodInfo
from scheduler.core import Scheduler, with_elastic_quota
from scheduler.framework.config import SchedulerConfig
from scheduler.framework.status import Code
from scheduler.plugins.elasticquota import ElasticQuota
from scheduler.plugins.elasticquota.preemption import EVICTION_PATIENCE, VictimFinder
from tests.support.builders import make_node, make_pod, quota_cr
from tests.support.scheduling import make_scheduler, mark_terminating

NOT_PREEMPTIBLE = {names.LABEL_QUOTA_PREEMPTIBLE: "false"}


def gpu_pod(name: str, priority: int, *, gpus: int = 1, namespace: str = "team-a", on: str = "", **labels: str) -> Pod:
    """A pod of `gpus` whole GPUs; `on` pins it to a node."""
    selector = {"host": on} if on else None
    pod = make_pod(
        name, namespace=namespace, extra={names.NVIDIA_GPU: gpus}, labels=labels or None, node_selector=selector
    )
    return dataclasses.replace(pod, priority=priority)


def scheduler_with(*nodes: str, gpus: int = 8, team_a_max: int = 400) -> Scheduler:
    """Nodes of `gpus` GPUs; team-a may use `team_a_max` gpu-core, team-b a whole node's worth."""
    scheduler = make_scheduler(
        *(make_node(n, gpus=gpus, labels={"host": n}) for n in nodes), config=with_elastic_quota(SchedulerConfig())
    )
    scheduler.quotas.set_quotas(
        [
            quota_cr("team-a", namespace="team-a", min={names.GPU_CORE: team_a_max}, max={names.GPU_CORE: team_a_max}),
            quota_cr("team-b", namespace="team-b", min={names.GPU_CORE: 800}, max={names.GPU_CORE: 800}),
        ]
    )
    return scheduler


def place(scheduler: Scheduler, *pods: Pod) -> None:
    for pod in pods:
        scheduler.quotas.update_pod(pod)
        assert scheduler.schedule_one(pod).scheduled, pod.key


def evict(scheduler: Scheduler, victims: tuple[PodInfo, ...]) -> None:
    """What the API does for the live scheduler: the victims go, from the cache and the quota."""
    for victim in victims:
        scheduler.cache.remove_pod(victim.pod)
        scheduler.quotas.remove_pod(victim.pod)


def test_quota_full_preempts_the_lowest_priority_pod_of_the_same_quota() -> None:
    scheduler = scheduler_with("n1")
    place(scheduler, *(gpu_pod(f"low{p}", p) for p in (3, 1, 4, 2)))
    urgent = gpu_pod("urgent", 10)
    scheduler.quotas.update_pod(urgent)
    outcome = scheduler.schedule_one(urgent)
    assert not outcome.scheduled and outcome.status.code is Code.UNSCHEDULABLE
    assert outcome.preemption is not None
    assert outcome.preemption.node == "n1"
    assert [v.key for v in outcome.preemption.victims] == ["team-a/low1"]
    assert outcome.preemption.describe() == "1 pod on n1 (quota team-a): team-a/low1"
    # Victims count in used until they are gone: asked again before that, the pod waits.
    again = scheduler.schedule_one(urgent)
    assert again.preemption is None and "waiting for 1 preempted pod(s) of quota team-a to go" in again.status.message
    evict(scheduler, outcome.preemption.victims)
    assert scheduler.schedule_one(urgent).node == "n1"


def test_other_quotas_equal_priorities_and_non_preemptible_pods_are_never_victims() -> None:
    scheduler = scheduler_with("n1", team_a_max=300)
    place(scheduler, *(gpu_pod(f"b{i}", 0, namespace="team-b") for i in range(5)))
    place(scheduler, gpu_pod("same", 10), *(gpu_pod(f"guard{i}", 0, **NOT_PREEMPTIBLE) for i in range(2)))
    outcome = scheduler.schedule_one(gpu_pod("urgent", 10))
    assert outcome.preemption is None
    assert outcome.status.message.startswith("0/1 nodes are available: Insufficient quotas, quotaName: team-a")
    assert "preemption" not in outcome.status.message  # no victim exists: nothing to say


def test_preemptible_pod_is_chosen_over_protected_ones() -> None:
    scheduler = scheduler_with("n1")
    place(scheduler, *(gpu_pod(f"guard{i}", 0, **NOT_PREEMPTIBLE) for i in range(3)), gpu_pod("spare", 5))
    outcome = scheduler.schedule_one(gpu_pod("urgent", 10))
    assert outcome.preemption is not None
    assert [v.key for v in outcome.preemption.victims] == ["team-a/spare"]


def test_node_full_picks_the_node_with_the_fewest_lowest_victims() -> None:
    scheduler = scheduler_with("n1", "n2", gpus=4, team_a_max=1600)
    # n1: four pods of priority 5; n2: two of priority 1 holding 2 GPUs each. Room for 2 GPUs
    # costs one victim on n2 (priority 1) or two on n1 (priority 5): n2 wins.
    place(scheduler, *(gpu_pod(f"n1-{i}", 5, on="n1") for i in range(4)))
    place(scheduler, *(gpu_pod(f"n2-{i}", 1, gpus=2, on="n2") for i in range(2)))
    outcome = scheduler.schedule_one(gpu_pod("urgent", 10, gpus=2))
    assert outcome.preemption is not None and outcome.preemption.node == "n2"
    assert len(outcome.preemption.victims) == 1


def test_no_preemption_for_a_pod_that_could_not_fit_even_with_every_victim_gone() -> None:
    scheduler = scheduler_with("n1", team_a_max=1600)
    place(scheduler, *(gpu_pod(f"low{i}", 0) for i in range(8)))
    outcome = scheduler.schedule_one(gpu_pod("huge", 10, gpus=9))  # more GPUs than the node has
    assert outcome.preemption is None
    assert "preemption: evicting lower-priority pods of quota team-a would not make room on any node." in (
        outcome.status.message
    )


def test_the_nominated_pod_keeps_the_room_its_victims_leave() -> None:
    scheduler = scheduler_with("n1", team_a_max=1600)
    place(scheduler, *(gpu_pod(f"low{i}", 0) for i in range(8)))
    urgent = gpu_pod("urgent", 10)
    outcome = scheduler.schedule_one(urgent)
    assert outcome.preemption is not None
    # As the live loop does: nominated, with the devices of its victims kept for it.
    scheduler.cache.nominator.nominate(PodInfo.of(urgent), outcome.preemption.node, outcome.preemption.victims)
    evict(scheduler, outcome.preemption.victims)
    # A pod of lower priority (of any quota) may not take the freed GPU meanwhile...
    assert scheduler.schedule_one(gpu_pod("sneak", 5, namespace="team-b")).node is None
    # ...while the nominated pod itself goes there.
    assert scheduler.schedule_one(urgent).node == "n1"
    assert scheduler.cache.nominator.node_of(PodInfo.of(urgent).ident) is None


def test_victims_that_never_go_are_chosen_again_after_a_while() -> None:
    scheduler = scheduler_with("n1")
    place(scheduler, *(gpu_pod(f"low{p}", p) for p in (1, 2, 3, 4)))
    framework = scheduler.frameworks[names.SCHEDULER_NAME]
    plugin = framework.plugin("ElasticQuota")
    assert isinstance(plugin, ElasticQuota)
    now = [0.0]
    plugin._victims = VictimFinder(scheduler.cache, scheduler.quotas, framework.handle.check, clock=lambda: now[0])
    urgent = gpu_pod("urgent", 10)
    first = scheduler.schedule_one(urgent).preemption
    assert first is not None
    now[0] = EVICTION_PATIENCE - 1  # the eviction failed: the victim is still there
    assert scheduler.schedule_one(urgent).preemption is None
    now[0] = EVICTION_PATIENCE + 1  # given up waiting: the same victim, evicted again
    again = scheduler.schedule_one(urgent).preemption
    assert again is not None and again.victims == first.victims


def test_a_nomination_read_back_without_victims_keeps_the_nodes_devices() -> None:
    scheduler = scheduler_with("n1", team_a_max=1600)
    place(scheduler, *(gpu_pod(f"low{i}", 0) for i in range(7)))
    # After a restart: the pod says where it was nominated, its victims are not known.
    scheduler.cache.nominator.nominate(PodInfo.of(gpu_pod("nominee", 10, gpus=2)), "n1")
    assert scheduler.schedule_one(gpu_pod("sneak", 5)).node is None  # the free GPU is kept
    assert scheduler.schedule_one(make_pod("cpu-only", namespace="team-b", cpu=1000)).node == "n1"
    assert scheduler.schedule_one(gpu_pod("higher", 20)).node == "n1"  # not kept from a higher priority


def test_the_quota_room_its_victims_free_is_the_nominated_pods_too() -> None:
    scheduler = scheduler_with("n1", "n2")
    place(scheduler, *(gpu_pod(f"low{i}", 0, on="n1") for i in range(4)))
    urgent = gpu_pod("urgent", 10)
    outcome = scheduler.schedule_one(urgent)
    assert outcome.preemption is not None
    scheduler.cache.nominator.nominate(PodInfo.of(urgent), outcome.preemption.node, outcome.preemption.victims)
    scheduler.quotas.update_pod(urgent)
    evict(scheduler, outcome.preemption.victims)
    # n2 has room, but the quota's freed GPU is the nominee's: a lower-priority pod waits.
    sneak = scheduler.schedule_one(gpu_pod("sneak", 5))
    assert sneak.node is None
    assert "used includes pods nominated ahead: {koordinator.sh/gpu-core: 100}" in sneak.status.message
    assert scheduler.schedule_one(urgent).scheduled


def test_no_preemption_by_a_pod_that_never_preempts_or_whose_victims_are_still_terminating() -> None:
    scheduler = scheduler_with("n1")
    place(scheduler, *(gpu_pod(f"low{p}", p) for p in (1, 2, 3, 4)))
    polite = dataclasses.replace(gpu_pod("polite", 10), preemption_policy="Never")
    assert scheduler.schedule_one(polite).preemption is None
    # Nominated to n1, where a lower-priority pod of its quota is terminating (after a restart:
    # the finder's own memory is gone, the API says where the pod was nominated).
    mark_terminating(scheduler, "team-a/low1")
    urgent = dataclasses.replace(gpu_pod("urgent", 10), nominated_node_name="n1")
    outcome = scheduler.schedule_one(urgent)
    assert outcome.preemption is None
    assert "waiting for 1 preempted pod(s) of quota team-a to go" in outcome.status.message
