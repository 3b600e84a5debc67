"""Koordinator's Reservation pre-allocation (`spec.preAllocation`) in the offline scheduler: a
Reservation placed over running pods takes their resources over — counted once, devices included —
keeps them for its owners when those pods go, and is not consumed by them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.crds.reservation import ObjectRef, Reservation, ReservationPhase, allocated_from_pod
from apis.extension import names
from apis.k8s.core import Pod
from scheduler.core import Scheduler, reservations
from tests.support.builders import allocated, make_node, make_pod, make_reservation
from tests.support.scheduling import make_scheduler

NOW = "2026-01-01T00:00:00Z"
GI = 1024**3
OWNER = {"app": "my-app"}
PRE_ALLOCATABLE = {names.LABEL_POD_PRE_ALLOCATABLE: "true"}


def reservation(
    requests: Mapping[str, str],
    *,
    name: str = "prealloc",
    labels: Mapping[str, str] | None = None,
    policy: Mapping[str, Any] | None = None,
    allocate_once: bool = True,
) -> Reservation:
    raw = make_reservation(name, requests=requests, owner_labels=OWNER, allocate_once=allocate_once).to_dict()
    raw["metadata"]["labels"] = dict(labels or {})
    raw["spec"]["preAllocation"] = True
    if policy is not None:
        raw["spec"]["preAllocationPolicy"] = dict(policy)
    raw.pop("status")
    return Reservation.from_dict(raw)


def running(scheduler: Scheduler, name: str, node: str, *, labels: Mapping[str, str] = OWNER, **amounts: Any) -> Pod:
    """A pod already bound to `node` (as the informer would hand it to the cache)."""
    pod = make_pod(name, node=node, labels=labels, **amounts)
    scheduler.cache.add_pod(pod)
    return pod


def pre_allocatable(name: str, priority: str, **amounts: int) -> Pod:
    """A running pod of `node-1` labelled pre-allocatable, with a priority."""
    annotations = {names.ANNOTATION_POD_PRE_ALLOCATABLE_PRIORITY: priority}
    return make_pod(name, node="node-1", labels=PRE_ALLOCATABLE, annotations=annotations, **amounts)


def using(scheduler: Scheduler, pod: Pod) -> str | None:
    """The Reservation the pod says it uses, as the cache holds the pod now."""
    info = scheduler.cache.pod_info(pod.meta.uid)
    assert info is not None
    found = allocated_from_pod(info.pod)
    return found.name if found is not None else None


def test_default_mode_places_it_over_a_running_owner_and_counts_the_node_once() -> None:
    scheduler = make_scheduler(
        make_node("node-0", milli_cpu=8000, memory=32 * GI), make_node("node-1", milli_cpu=8000, memory=32 * GI)
    )
    pod = running(scheduler, "my-app-0", "node-1", cpu=200, memory=400 * 1024**2)
    outcome, placed = scheduler.place_reservation(reservation({"cpu": "500m", "memory": "800Mi"}), now=NOW)
    assert outcome.scheduled and placed.node_name == "node-1"
    assert placed.pre_allocated == (ObjectRef(namespace="default", name="my-app-0", uid=pod.meta.uid),)
    assert using(scheduler, pod) == "prealloc"
    node = scheduler.cache.node("node-1")
    assert node is not None
    # The pod's 200m are the Reservation's: 500m on the node in all, not 700m.
    assert node.requested["cpu"] == 500 and node.requested["memory"] == 800 * 1024**2
    [held] = scheduler.cache.reservations_on("node-1")
    assert dict(held.remaining) == {"cpu": 300, "memory": 400 * 1024**2}
    # Its pod does not consume it (allocateOnce): the controller's status keeps it Available.
    after = reservations.consumed(placed, [scheduler.cache.pod_info(pod.meta.uid).pod], now=NOW)  # type: ignore[union-attr]
    assert after.phase is ReservationPhase.AVAILABLE and after.current_owners[0].name == "my-app-0"


def test_when_the_pre_allocated_pod_goes_an_owner_gets_what_it_had() -> None:
    scheduler = make_scheduler(make_node("node-1", milli_cpu=2000, memory=8 * GI))
    pod = running(scheduler, "my-app-0", "node-1", cpu=1500, memory=GI)
    _, placed = scheduler.place_reservation(reservation({"cpu": "1500m", "memory": "1Gi"}), now=NOW)
    assert placed.node_name == "node-1"
    # A stranger finds the node full: the pod's 1500m are the Reservation's, not free.
    assert scheduler.schedule_one(make_pod("stranger", cpu=1000)).node is None
    info = scheduler.cache.pod_info(pod.meta.uid)
    assert info is not None
    scheduler.cache.remove_pod(info.pod)
    [held] = scheduler.cache.reservations_on("node-1")
    assert dict(held.remaining) == {"cpu": 1500, "memory": GI}  # held whole again, for the owners
    assert scheduler.schedule_one(make_pod("stranger-2", cpu=1000)).node is None
    successor = scheduler.schedule_one(make_pod("my-app-1", labels=OWNER, cpu=1500, memory=GI))
    assert successor.node == "node-1"
    assert allocated_from_pod(make_pod("x", annotations=successor.annotations)) is not None
    assert scheduler.cache.reservations_on("node-1") == []  # allocateOnce: consumed by the owner


def test_a_pod_asking_more_than_it_reserves_is_not_taken_over() -> None:
    scheduler = make_scheduler(make_node("node-0", milli_cpu=8000), make_node("node-1", milli_cpu=8000))
    pod = running(scheduler, "my-app-0", "node-1", cpu=1000)
    outcome, placed = scheduler.place_reservation(reservation({"cpu": "500m"}), now=NOW)
    assert outcome.scheduled and placed.pre_allocated == ()
    assert using(scheduler, pod) is None


def test_cluster_mode_takes_the_highest_priority_pre_allocatable_pod() -> None:
    scheduler = make_scheduler(make_node("node-1", milli_cpu=8000, memory=32 * GI))
    low, high = pre_allocatable("batch-low", "10", cpu=2000), pre_allocatable("batch-high", "100", cpu=2000)
    owner = running(scheduler, "my-app-0", "node-1", cpu=2000)  # an owner, but not labelled
    for pod in (low, high):
        scheduler.cache.add_pod(pod)
    _, placed = scheduler.place_reservation(reservation({"cpu": "2"}, policy={"mode": "Cluster"}), now=NOW)
    assert [r.name for r in placed.pre_allocated] == ["batch-high"]
    assert using(scheduler, high) == "prealloc" and using(scheduler, low) is None and using(scheduler, owner) is None


def test_enable_multiple_takes_pods_until_the_node_has_room() -> None:
    scheduler = make_scheduler(make_node("node-1", milli_cpu=2000, memory=4 * GI))
    one = running(scheduler, "batch-1", "node-1", labels=PRE_ALLOCATABLE, cpu=1000, memory=2 * GI)
    two = running(scheduler, "batch-2", "node-1", labels=PRE_ALLOCATABLE, cpu=1000, memory=2 * GI)
    single = reservation({"cpu": "2", "memory": "4Gi"}, name="single", policy={"mode": "Cluster"})
    outcome, _ = scheduler.place_reservation(single, now=NOW)
    assert not outcome.scheduled  # one pod is not room enough
    multi = reservation({"cpu": "2", "memory": "4Gi"}, policy={"mode": "Cluster", "enableMultiple": True})
    outcome, placed = scheduler.place_reservation(multi, now=NOW)
    assert outcome.scheduled, outcome.status.message
    assert sorted(r.name for r in placed.pre_allocated) == ["batch-1", "batch-2"]
    assert using(scheduler, one) == using(scheduler, two) == "prealloc"
    node = scheduler.cache.node("node-1")
    assert node is not None and node.requested == {"cpu": 2000, "memory": 4 * GI}


def test_enable_multiple_takes_pods_until_they_make_up_the_reservation_on_a_roomy_node() -> None:
    """The manual's example: 1 CPU and 2Gi each, for a Reservation of 2 CPUs and 4Gi; the third
    pod would overflow it and is left alone."""
    scheduler = make_scheduler(make_node("node-1", milli_cpu=64000, memory=256 * GI))
    for i, priority in enumerate(("100", "90", "80")):
        scheduler.cache.add_pod(pre_allocatable(f"batch-{i}", priority, cpu=1000, memory=2 * GI))
    multi = reservation({"cpu": "2", "memory": "4Gi"}, policy={"mode": "Cluster", "enableMultiple": True})
    _, placed = scheduler.place_reservation(multi, now=NOW)
    assert sorted(r.name for r in placed.pre_allocated) == ["batch-0", "batch-1"]
    node = scheduler.cache.node("node-1")
    assert node is not None and node.requested == {"cpu": 3000, "memory": 6 * GI}


def test_pre_allocation_required_waits_for_a_pod_to_take_over() -> None:
    scheduler = make_scheduler(make_node("node-1", milli_cpu=8000))
    required = {names.LABEL_PRE_ALLOCATION_REQUIRED: "true"}
    outcome, pending = scheduler.place_reservation(reservation({"cpu": "1"}, labels=required), now=NOW)
    assert not outcome.scheduled and "pre allocation required" in outcome.status.message
    assert pending.phase is ReservationPhase.PENDING


def test_a_pod_taken_over_by_one_reservation_is_not_taken_by_another() -> None:
    scheduler = make_scheduler(make_node("node-1", milli_cpu=8000))
    pod = running(scheduler, "my-app-0", "node-1", cpu=1000)
    _, first = scheduler.place_reservation(reservation({"cpu": "1"}, name="first"), now=NOW)
    _, second = scheduler.place_reservation(reservation({"cpu": "1"}, name="second"), now=NOW)
    assert [r.name for r in first.pre_allocated] == ["my-app-0"] and second.pre_allocated == ()
    assert using(scheduler, pod) == "first"
    node = scheduler.cache.node("node-1")
    assert node is not None and node.requested["cpu"] == 2000  # the pod inside first, and second


def test_the_pods_gpu_and_the_reservations_are_one_holding() -> None:
    scheduler = make_scheduler(make_node("node-1", gpus=2, nics_per_switch=0))
    pod = make_pod(
        "my-app-0",
        node="node-1",
        labels=OWNER,
        annotations={
            names.ANNOTATION_DEVICE_ALLOCATED: '{"gpu":[{"minor":1,"resources":{"koordinator.sh/gpu-core":'
            '"100","koordinator.sh/gpu-memory":"80Gi","koordinator.sh/gpu-memory-ratio":"100"}}]}'
        },
        gpu_core=100,
        gpu_ratio=100,
    )
    scheduler.cache.add_pod(pod)
    gpu = {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100"}
    outcome, placed = scheduler.place_reservation(reservation(gpu), now=NOW)
    assert outcome.scheduled and [r.name for r in placed.pre_allocated] == ["my-app-0"]
    # It reserves the pod's very GPU, and nothing is over-committed: the pod and it hold it once.
    assert allocated(outcome.annotations)["gpu"] == [1]
    assert scheduler.cache.overcommits("node-1") == ()
    usage = {u.minor: u.used.get(names.GPU_CORE, 0) for u in scheduler.cache.device_usage("node-1")}
    assert usage == {0: 0, 1: 100}
    # A stranger gets the other GPU; once the pod is gone, the GPU is held for the owners.
    assert allocated(scheduler.schedule_one(make_pod("x", gpu_core=100, gpu_ratio=100)).annotations)["gpu"] == [0]
    info = scheduler.cache.pod_info(pod.meta.uid)
    assert info is not None
    scheduler.cache.remove_pod(info.pod)
    assert scheduler.schedule_one(make_pod("y", gpu_core=100, gpu_ratio=100)).node is None
    owner = scheduler.schedule_one(make_pod("my-app-1", labels=OWNER, gpu_core=100, gpu_ratio=100))
    assert allocated(owner.annotations)["gpu"] == [1]
    assert scheduler.cache.overcommits("node-1") == ()
