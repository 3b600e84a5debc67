"""Reservations in the offline scheduler: held against other pods, handed to their owners."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from apis.crds.reservation import ReservationPhase, allocated_from_pod
from apis.extension import names
from apis.k8s.core import Pod
from scheduler.core import Scheduler
from scheduler.core import reservations as transitions
from tests.support.builders import allocated, make_node, make_pod, make_reservation
from tests.support.scheduling import make_scheduler

NOW = "2026-01-01T00:00:00Z"


def bind(scheduler: Scheduler, pod: Pod) -> tuple[str | None, Mapping[str, str]]:
    outcome = scheduler.schedule_one(pod)
    return outcome.node, outcome.annotations


FOUR_GPUS = {names.NVIDIA_GPU: "4"}
HALF_GPU = {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}


@pytest.fixture
def scheduler() -> Scheduler:
    return make_scheduler(make_node("node-a"))


def test_four_whole_gpus_are_held_against_others_and_given_to_the_owner(scheduler: Scheduler) -> None:
    outcome, placed = scheduler.place_reservation(make_reservation(requests=FOUR_GPUS), now=NOW)
    assert outcome.scheduled and placed.phase is ReservationPhase.AVAILABLE and placed.node_name == "node-a"
    reserved = allocated(outcome.annotations)["gpu"]
    assert len(reserved) == 4
    # A non-owner asking for 8 GPUs no longer fits; one asking for the 4 others gets the others.
    assert bind(scheduler, make_pod("big", nvidia_gpu=8))[0] is None
    other_node, other = bind(scheduler, make_pod("other", nvidia_gpu=4))
    assert other_node == "node-a" and set(allocated(other)["gpu"]).isdisjoint(reserved)
    # The owner gets exactly the reserved GPUs, and the pod is told which Reservation it used.
    node, annotations = bind(scheduler, make_pod("owner", labels={"app": "train"}, nvidia_gpu=4))
    assert node == "node-a" and allocated(annotations)["gpu"] == reserved
    owner = make_pod("owner", labels={"app": "train"}, annotations=annotations, node="node-a")
    found = allocated_from_pod(owner)
    assert found is not None and found.name == "r" and found.uid == placed.uid
    assert scheduler.cache.reservations_on("node-a") == []  # consumed: held no more


def test_half_a_gpu_goes_to_the_owner_on_the_reserved_gpu(scheduler: Scheduler) -> None:
    outcome, _ = scheduler.place_reservation(make_reservation(requests=HALF_GPU), now=NOW)
    [gpu] = allocated(outcome.annotations)["gpu"]
    # Non-owners fill the rest: 7 whole GPUs and the other half of the reserved one.
    assert bind(scheduler, make_pod("seven", nvidia_gpu=7))[0] == "node-a"
    assert bind(scheduler, make_pod("half", gpu_core=50, gpu_ratio=50))[0] == "node-a"
    assert bind(scheduler, make_pod("more", gpu_core=50, gpu_ratio=50))[0] is None
    node, annotations = bind(scheduler, make_pod("owner", labels={"app": "train"}, gpu_core=50, gpu_ratio=50))
    assert node == "node-a" and allocated(annotations)["gpu"] == [gpu]


def test_ignored_label_keeps_an_owner_off_the_reservation(scheduler: Scheduler) -> None:
    scheduler.place_reservation(make_reservation(requests={names.NVIDIA_GPU: "8"}), now=NOW)
    labels = {"app": "train", names.LABEL_RESERVATION_IGNORED: "true"}
    assert bind(scheduler, make_pod("owner", labels=labels, nvidia_gpu=1))[0] is None


def test_a_node_with_the_reservation_wins_over_an_emptier_one() -> None:
    scheduler = make_scheduler(make_node("node-a"), make_node("node-b"))
    _, placed = scheduler.place_reservation(make_reservation(requests={names.NVIDIA_GPU: "2"}), now=NOW)
    node, annotations = bind(scheduler, make_pod("owner", labels={"app": "train"}, nvidia_gpu=2))
    assert node == placed.node_name
    assert names.ANNOTATION_RESERVATION_ALLOCATED in annotations


def test_restart_rebuilds_holdings_without_giving_twice(scheduler: Scheduler) -> None:
    _, placed = scheduler.place_reservation(make_reservation(requests=FOUR_GPUS), now=NOW)
    node, annotations = bind(scheduler, make_pod("owner", labels={"app": "train"}, nvidia_gpu=4))
    owner = make_pod("owner", labels={"app": "train"}, annotations=annotations, node=node or "", nvidia_gpu=4)
    # A new scheduler sees the owner first, then the (still Available) Reservation: held once.
    fresh = make_scheduler(make_node("node-a"))
    fresh.cache.add_pod(owner)
    fresh.cache.add_reservation(placed)
    assert fresh.cache.reservations_on("node-a") == []
    assert bind(fresh, make_pod("rest", nvidia_gpu=4))[0] == "node-a"
    # The other order gives the same.
    other = make_scheduler(make_node("node-a"))
    other.cache.add_reservation(placed)
    other.cache.add_pod(owner)
    assert other.cache.reservations_on("node-a") == []
    assert bind(other, make_pod("rest", nvidia_gpu=4))[0] == "node-a"
    assert bind(other, make_pod("more", nvidia_gpu=1))[0] is None


def test_succeeded_and_deleted_release_and_owner_leaving_counts_once(scheduler: Scheduler) -> None:
    _, placed = scheduler.place_reservation(make_reservation(requests=FOUR_GPUS), now=NOW)
    node, annotations = bind(scheduler, make_pod("owner", labels={"app": "train"}, nvidia_gpu=4))
    owner = make_pod("owner", labels={"app": "train"}, annotations=annotations, node=node or "", nvidia_gpu=4)
    done = transitions.consumed(placed, [owner], now=NOW)
    assert done.phase is ReservationPhase.SUCCEEDED and done.current_owners[0].name == "owner"
    scheduler.cache.add_reservation(done)
    scheduler.cache.remove_pod(owner)
    # Everything is free again: 8 GPUs fit, exactly once.
    assert bind(scheduler, make_pod("eight", nvidia_gpu=8))[0] == "node-a"


def test_expired_reservation_releases(scheduler: Scheduler) -> None:
    _, placed = scheduler.place_reservation(make_reservation(requests={names.NVIDIA_GPU: "8"}), now=NOW)
    assert bind(scheduler, make_pod("x", nvidia_gpu=1))[0] is None
    gone = transitions.expired(placed, now=NOW)
    assert gone.is_expired
    scheduler.cache.add_reservation(gone)
    assert bind(scheduler, make_pod("x", nvidia_gpu=1))[0] == "node-a"


def test_unschedulable_reservation_stays_pending_with_why(scheduler: Scheduler) -> None:
    outcome, pending = scheduler.place_reservation(make_reservation(requests={names.NVIDIA_GPU: "9"}), now=NOW)
    assert not outcome.scheduled and pending.phase is ReservationPhase.PENDING
    [condition] = pending.conditions
    assert (condition.type, condition.status, condition.reason) == ("Scheduled", "False", "Unschedulable")
    assert "gpu" in condition.message.lower()


def test_not_allocate_once_holds_again_when_its_owner_leaves(scheduler: Scheduler) -> None:
    scheduler.place_reservation(make_reservation(requests=FOUR_GPUS, allocate_once=False), now=NOW)
    node, annotations = bind(scheduler, make_pod("owner", labels={"app": "train"}, nvidia_gpu=4))
    owner = make_pod("owner", labels={"app": "train"}, annotations=annotations, node=node or "", nvidia_gpu=4)
    assert bind(scheduler, make_pod("five", nvidia_gpu=5))[0] is None
    scheduler.cache.remove_pod(owner)
    assert [h.name for h in scheduler.cache.reservations_on("node-a")] == ["r"]
    assert bind(scheduler, make_pod("five", nvidia_gpu=5))[0] is None
    assert bind(scheduler, make_pod("four", nvidia_gpu=4))[0] == "node-a"


@pytest.mark.parametrize(
    ("requests", "owner", "before"),
    [(FOUR_GPUS, {"nvidia_gpu": 4}, 3), (HALF_GPU, {"gpu_core": 50, "gpu_ratio": 50}, 1)],
    ids=["four-gpus", "half-gpu"],
)
def test_owner_gets_the_reserved_devices_even_when_others_look_better(
    scheduler: Scheduler, requests: Mapping[str, str], owner: Mapping[str, int], before: int
) -> None:
    # A pod takes the first GPUs, so the Reservation gets later ones; once that pod is gone, a
    # fresh allocation would prefer the first GPUs again: the owner must still get the reserved.
    node, annotations = bind(scheduler, make_pod("first", nvidia_gpu=before))
    assert node == "node-a"
    outcome, _ = scheduler.place_reservation(make_reservation(requests=requests), now=NOW)
    reserved = allocated(outcome.annotations)["gpu"]
    scheduler.cache.remove_pod(make_pod("first", node="node-a", annotations=annotations))
    node, annotations = bind(scheduler, make_pod("owner", labels={"app": "train"}, **owner))
    assert node == "node-a" and allocated(annotations)["gpu"] == reserved


def test_reservation_affinity_pins_a_pod_to_the_reservations_it_selects() -> None:
    scheduler = make_scheduler(make_node("node-a"), make_node("node-b"))
    scheduler.place_reservation(make_reservation("first", requests={names.NVIDIA_GPU: "1"}), now=NOW)
    _, second = scheduler.place_reservation(make_reservation("second", requests={names.NVIDIA_GPU: "1"}), now=NOW)
    wants_second = {names.ANNOTATION_RESERVATION_AFFINITY: '{"name": "second"}'}
    owner = make_pod("owner", labels={"app": "train"}, annotations=wants_second, nvidia_gpu=1)
    node, annotations = bind(scheduler, owner)
    assert node == second.node_name and '"name":"second"' in annotations[names.ANNOTATION_RESERVATION_ALLOCATED]
    # Second is consumed: a pod with the same affinity waits, though first and free GPUs remain.
    outcome = scheduler.schedule_one(make_pod("again", labels={"app": "train"}, annotations=wants_second, nvidia_gpu=1))
    assert not outcome.scheduled and "no reservations match reservation affinity" in outcome.status.message
    broken = {names.ANNOTATION_RESERVATION_AFFINITY: "{"}
    outcome = scheduler.schedule_one(make_pod("broken", annotations=broken, nvidia_gpu=1))
    assert not outcome.scheduled and "not valid JSON" in outcome.status.message
