"""Koordinator's Reservation semantics in the offline scheduler: owners sharing one
(`allocateOnce: false`), allocate policies, and how a pod chooses among the Reservations it may use
(`reservation-order`, taints and tolerations, `unschedulable`, exact-match, affinity).

Every test that places several pods also holds the promise: no device share is given twice
(no over-committed device), owners never take more of a Reservation than it reserved, and
nothing it holds goes to a pod that is not its owner.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Mapping
from typing import Any

from apis.crds.device import DeviceType
from apis.crds.reservation import Reservation, allocated_from_pod
from apis.extension import names
from apis.k8s.core import Pod
from scheduler.core import Scheduler
from scheduler.core.scheduler import Outcome
from tests.support.builders import allocated, make_node, make_pod, make_reservation
from tests.support.scheduling import make_scheduler

NOW = "2026-01-01T00:00:00Z"
GI = 1024**3
OWNER = {"app": "app-demo"}
HALF_GPU = {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}
GPU = DeviceType.GPU


def reservation(
    name: str,
    requests: Mapping[str, str],
    *,
    allocate_once: bool = False,
    policy: str = "",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node: str = "",
    **spec: Any,
) -> Reservation:
    raw = make_reservation(name, requests=requests, owner_labels=OWNER, allocate_once=allocate_once).to_dict()
    raw["metadata"]["labels"] = dict(labels or {})
    raw["metadata"]["annotations"] = dict(annotations or {})
    if policy:
        raw["spec"]["allocatePolicy"] = policy
    if node:
        raw["spec"]["template"]["spec"]["nodeName"] = node
    raw["spec"].update(spec)
    raw.pop("status")
    return Reservation.from_dict(raw)


def place(scheduler: Scheduler, r: Reservation) -> Reservation:
    outcome, placed = scheduler.place_reservation(r, now=NOW)
    assert outcome.scheduled, outcome.status.message
    return placed


def owner(name: str, *, annotations: Mapping[str, str] | None = None, **amounts: int) -> Pod:
    return make_pod(name, labels=OWNER, annotations=annotations, **amounts)


def taken_from(outcome: Outcome) -> str | None:
    """The Reservation a placed pod says it used."""
    pod = make_pod("x", annotations=outcome.annotations)
    found = allocated_from_pod(pod)
    return found.name if found is not None else None


def affinity(**doc: Any) -> dict[str, str]:
    return {names.ANNOTATION_RESERVATION_AFFINITY: json.dumps(doc)}


def assert_promise(scheduler: Scheduler, node: str) -> None:
    """No device over-committed; on each device a Reservation holds, only it and its owners."""
    cache = scheduler.cache
    assert cache.overcommits(node) == ()
    for held in cache.reservations_on(node):
        ours = {f"default/{held.name}"} | {
            p.key for p in cache.pods() if p.pod.meta.annotations.get(names.ANNOTATION_RESERVATION_ALLOCATED)
        }
        for dtype, allocs in held.allocations.items():
            for usage in cache.device_usage(node):
                if usage.type is dtype and usage.minor in {a.minor for a in allocs}:
                    assert {h.pod for h in usage.holders} <= ours, f"{dtype.value} {usage.minor}: {usage.holders}"


# --- allocateOnce: false ----------------------------------------------------------------------------


def test_owners_share_what_is_left_and_the_node_counts_the_reservation_once() -> None:
    """The manual's reservation-demo-big: 6 CPUs and 20Gi for two replicas of 2 CPUs and 10Gi."""
    scheduler = make_scheduler(make_node("node-1", milli_cpu=8000, memory=32 * GI))
    place(scheduler, reservation("big", {"cpu": "6", "memory": "20Gi"}))
    node = scheduler.cache.node("node-1")
    assert node is not None
    for i in range(2):
        outcome = scheduler.schedule_one(owner(f"app-{i}", cpu=2000, memory=10 * GI))
        assert outcome.node == "node-1" and taken_from(outcome) == "big"
        # The owners' requests come out of the Reservation, not on top of it.
        assert node.requested == {"cpu": 6000, "memory": 20 * GI}
    [held] = scheduler.cache.reservations_on("node-1")
    assert held.owners == 2 and dict(held.allocated) == {"cpu": 4000, "memory": 20 * GI}
    assert dict(held.remaining) == {"cpu": 2000}
    # What is left stays the owners': a non-owner gets only the node's own 2 free CPUs.
    assert scheduler.schedule_one(make_pod("stranger", cpu=2001)).node is None
    assert scheduler.schedule_one(make_pod("small", cpu=2000)).node == "node-1"
    assert node.requested["cpu"] == 8000


def test_an_owner_gone_gives_its_share_back_to_the_reservation() -> None:
    scheduler = make_scheduler(make_node("node-1", milli_cpu=8000, memory=32 * GI))
    place(scheduler, reservation("big", {"cpu": "6", "memory": "20Gi"}))
    first = scheduler.schedule_one(owner("app-0", cpu=2000, memory=10 * GI))
    scheduler.schedule_one(owner("app-1", cpu=2000, memory=10 * GI))
    gone = make_pod("app-0", labels=OWNER, annotations=first.annotations, node="node-1", cpu=2000, memory=10 * GI)
    scheduler.cache.remove_pod(gone)
    [held] = scheduler.cache.reservations_on("node-1")
    assert held.owners == 1 and dict(held.remaining) == {"cpu": 4000, "memory": 10 * GI}
    node = scheduler.cache.node("node-1")
    assert node is not None and node.requested == {"cpu": 6000, "memory": 20 * GI}
    # The share is the next owner's, and still no one else's.
    assert scheduler.schedule_one(make_pod("stranger", cpu=2001)).node is None
    assert taken_from(scheduler.schedule_one(owner("app-2", cpu=4000, memory=10 * GI))) == "big"


def test_a_restart_counts_shared_owners_once_whatever_comes_first() -> None:
    scheduler = make_scheduler(make_node("node-1", milli_cpu=8000, memory=32 * GI))
    placed = place(scheduler, reservation("big", {"cpu": "6", "memory": "20Gi"}))
    bound = []
    for i in range(2):
        outcome = scheduler.schedule_one(owner(f"app-{i}", cpu=2000, memory=10 * GI))
        bound.append(
            make_pod(f"app-{i}", labels=OWNER, annotations=outcome.annotations, node="node-1", cpu=2000, memory=10 * GI)
        )
    for order in ("pods first", "reservation first"):
        again = make_scheduler(make_node("node-1", milli_cpu=8000, memory=32 * GI))
        if order == "reservation first":
            again.cache.add_reservation(placed)
        for pod in bound:
            again.cache.add_pod(pod)
        again.cache.add_reservation(placed)
        node = again.cache.node("node-1")
        assert node is not None and node.requested == {"cpu": 6000, "memory": 20 * GI}, order
        [held] = again.cache.reservations_on("node-1")
        assert dict(held.remaining) == {"cpu": 2000}, order


def test_owners_share_one_reserved_gpu_and_no_one_else_gets_any_of_it() -> None:
    scheduler = make_scheduler(make_node("node-a", gpus=2, nics_per_switch=0))
    outcome, _ = scheduler.place_reservation(
        reservation("gpu", {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100"}), now=NOW
    )
    [reserved] = allocated(outcome.annotations)["gpu"]
    first = scheduler.schedule_one(owner("o-0", gpu_core=50, gpu_ratio=50))
    assert allocated(first.annotations)["gpu"] == [reserved] and taken_from(first) == "gpu"
    # Half is left for the owners: a non-owner's half goes to the other GPU, the next one fails.
    stranger = scheduler.schedule_one(make_pod("x-0", gpu_core=50, gpu_ratio=50))
    assert allocated(stranger.annotations)["gpu"] != [reserved]
    assert scheduler.schedule_one(make_pod("x-1", gpu_core=60, gpu_ratio=60)).node is None
    assert_promise(scheduler, "node-a")
    second = scheduler.schedule_one(owner("o-1", gpu_core=50, gpu_ratio=50))
    assert allocated(second.annotations)["gpu"] == [reserved]
    [held] = scheduler.cache.reservations_on("node-a")
    assert held.allocations == {} and held.owners == 2
    # Owners together hold what was reserved of that GPU, and not a bit more.
    [usage] = [u for u in scheduler.cache.device_usage("node-a") if u.minor == reserved]
    assert usage.used[names.GPU_CORE] == 100 and {h.pod for h in usage.holders} == {"default/o-0", "default/o-1"}
    assert_promise(scheduler, "node-a")


# --- allocatePolicy ---------------------------------------------------------------------------------


def test_aligned_takes_the_reservation_first_and_the_node_for_the_rest() -> None:
    scheduler = make_scheduler(make_node("node-1", milli_cpu=8000, memory=32 * GI, gpus=2, nics_per_switch=0))
    outcome, _ = scheduler.place_reservation(reservation("r", {"cpu": "2", **HALF_GPU}, policy="Aligned"), now=NOW)
    [reserved] = allocated(outcome.annotations)["gpu"]
    # More CPU than reserved and more GPU than the reserved half: both come partly from the node.
    pod = scheduler.schedule_one(owner("big", cpu=3000, gpu_core=100, gpu_ratio=100))
    assert pod.node == "node-1" and taken_from(pod) == "r"
    node = scheduler.cache.node("node-1")
    assert node is not None and node.requested["cpu"] == 3000  # not 2 + 3
    assert_promise(scheduler, "node-1")
    # Asking for what is reserved, it gets the reserved half itself.
    again = make_scheduler(make_node("node-1", milli_cpu=8000, memory=32 * GI, gpus=2, nics_per_switch=0))
    again.place_reservation(reservation("r", {"cpu": "2", **HALF_GPU}, policy="Aligned"), now=NOW)
    half = again.schedule_one(owner("half", cpu=1000, gpu_core=50, gpu_ratio=50))
    assert allocated(half.annotations)["gpu"] == [reserved]


def test_restricted_limits_what_it_reserves_to_what_is_left_and_leaves_the_rest_to_the_node() -> None:
    scheduler = make_scheduler(make_node("node-1", milli_cpu=8000, memory=32 * GI, gpus=2, nics_per_switch=0))
    place(scheduler, reservation("r", {"cpu": "2", "memory": "4Gi"}, policy="Restricted"))
    must = affinity(name="r")
    # CPU beyond what it reserves: not from this Reservation (Koordinator's reason says why).
    refused = scheduler.schedule_one(owner("too-much", annotations=must, cpu=3000, memory=GI))
    assert refused.node is None and "Insufficient cpu" in refused.status.message
    # Without an affinity the pod may still run on the node's free room, outside the Reservation.
    outside = scheduler.schedule_one(owner("outside", cpu=3000, memory=GI))
    assert outside.node == "node-1" and taken_from(outside) is None
    # What it does not reserve (a GPU) comes from the node; what it reserves, from it.
    inside = scheduler.schedule_one(
        owner("inside", annotations=must, cpu=2000, memory=4 * GI, gpu_core=100, gpu_ratio=100)
    )
    assert taken_from(inside) == "r" and allocated(inside.annotations)["gpu"]
    node = scheduler.cache.node("node-1")
    assert node is not None and node.requested["cpu"] == 5000  # outside 3 + the Reservation's 2


def test_restricted_options_restrict_only_the_resources_they_list() -> None:
    options = {names.ANNOTATION_RESERVATION_RESTRICTED_OPTIONS: '{"resources": ["cpu"]}'}
    scheduler = make_scheduler(make_node("node-1", milli_cpu=8000, memory=32 * GI))
    place(scheduler, reservation("r", {"cpu": "2", "memory": "4Gi"}, policy="Restricted", annotations=options))
    must = affinity(name="r")
    # Memory is not restricted: more than reserved is fine; CPU is.
    assert taken_from(scheduler.schedule_one(owner("mem", annotations=must, cpu=1000, memory=8 * GI))) == "r"
    refused = scheduler.schedule_one(owner("cpu", annotations=must, cpu=1001))
    assert refused.node is None and "Insufficient cpu" in refused.status.message


def test_restricted_gives_only_the_reserved_share_of_the_reserved_gpu() -> None:
    scheduler = make_scheduler(make_node("node-a", gpus=2, nics_per_switch=0))
    outcome, _ = scheduler.place_reservation(reservation("r", HALF_GPU, policy="Restricted"), now=NOW)
    [reserved] = allocated(outcome.annotations)["gpu"]
    must = affinity(name="r")
    more = scheduler.schedule_one(owner("more", annotations=must, gpu_core=75, gpu_ratio=75))
    assert more.node is None
    exact = scheduler.schedule_one(owner("exact", annotations=must, gpu_core=50, gpu_ratio=50))
    assert allocated(exact.annotations)["gpu"] == [reserved]
    assert_promise(scheduler, "node-a")


def test_restricted_devices_come_only_from_the_reserved_gpus() -> None:
    scheduler = make_scheduler(make_node("node-a", gpus=4, nics_per_switch=0))
    outcome, _ = scheduler.place_reservation(reservation("r", {names.NVIDIA_GPU: "2"}, policy="Restricted"), now=NOW)
    reserved = sorted(allocated(outcome.annotations)["gpu"])
    one = scheduler.schedule_one(owner("one", annotations=affinity(name="r"), nvidia_gpu=1))
    assert allocated(one.annotations)["gpu"][0] in reserved
    two = scheduler.schedule_one(owner("two", annotations=affinity(name="r"), nvidia_gpu=1))
    assert sorted(allocated(one.annotations)["gpu"] + allocated(two.annotations)["gpu"]) == reserved
    # Both reserved GPUs are taken: a third owner may not spill onto the two free ones.
    assert scheduler.schedule_one(owner("three", annotations=affinity(name="r"), nvidia_gpu=1)).node is None
    assert_promise(scheduler, "node-a")


# --- choosing a Reservation -------------------------------------------------------------------------


def test_reservation_order_picks_the_lowest_order_across_nodes_and_on_one_node() -> None:
    scheduler = make_scheduler(make_node("node-a"), make_node("node-b"))
    order = names.LABEL_RESERVATION_ORDER
    for name, value, node in (("second", "2", "node-a"), ("first", "1", "node-b"), ("unordered", "0", "node-b")):
        place(scheduler, reservation(name, {"cpu": "1"}, allocate_once=True, labels={order: value}, node=node))
    picked = scheduler.schedule_one(owner("p", cpu=1000))
    assert (picked.node, taken_from(picked)) == ("node-b", "first")
    # Then the next lowest order, though an unordered one is left on the same node.
    picked = scheduler.schedule_one(owner("q", cpu=1000))
    assert (picked.node, taken_from(picked)) == ("node-a", "second")


def test_without_an_order_the_tightest_fit_is_taken() -> None:
    scheduler = make_scheduler(make_node("node-a"))
    place(scheduler, reservation("roomy", {"cpu": "8"}))
    place(scheduler, reservation("snug", {"cpu": "2"}))
    assert taken_from(scheduler.schedule_one(owner("p", cpu=2000))) == "snug"


def test_reservation_taints_need_tolerations_in_the_affinity() -> None:
    taints = [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]
    scheduler = make_scheduler(make_node("node-a"))
    place(scheduler, reservation("tainted", {"cpu": "2"}, taints=taints))
    intolerant = scheduler.schedule_one(owner("a", annotations=affinity(reservationSelector={}), cpu=1000))
    assert intolerant.node is None and "had untolerated taint {dedicated: infer}" in intolerant.status.message
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}]
    tolerant = scheduler.schedule_one(owner("b", annotations=affinity(tolerations=tolerations), cpu=1000))
    assert taken_from(tolerant) == "tainted"
    # As in Koordinator, a pod without a reservation-affinity is not held to a Reservation's taints.
    assert taken_from(scheduler.schedule_one(owner("c", cpu=1000))) == "tainted"


def test_an_unschedulable_reservation_is_placed_but_takes_only_owners_that_tolerate_it() -> None:
    scheduler = make_scheduler(make_node("node-a", milli_cpu=4000))
    place(scheduler, reservation("closed", {"cpu": "2"}, unschedulable=True))
    plain = scheduler.schedule_one(owner("plain", cpu=1000))
    assert plain.node == "node-a" and taken_from(plain) is None  # on the node's own room
    refused = scheduler.schedule_one(owner("picky", annotations=affinity(reservationSelector={}), cpu=1000))
    assert refused.node is None and "Reservation(s) is unschedulable" in refused.status.message
    tolerations = [{"key": names.TAINT_NODE_UNSCHEDULABLE, "operator": "Exists", "effect": "NoSchedule"}]
    assert (
        taken_from(scheduler.schedule_one(owner("ok", annotations=affinity(tolerations=tolerations), cpu=1000)))
        == "closed"
    )


def test_exact_match_takes_only_a_reservation_of_exactly_the_listed_resources() -> None:
    scheduler = make_scheduler(make_node("node-a"))
    place(scheduler, reservation("r", {"cpu": "2", "memory": "4Gi"}))
    both = {names.ANNOTATION_EXACT_MATCH_RESERVATION: '{"resourceNames": ["cpu", "memory"]}'}
    assert taken_from(scheduler.schedule_one(owner("half-memory", annotations=both, cpu=2000, memory=2 * GI))) is None
    cpu_only = {names.ANNOTATION_EXACT_MATCH_RESERVATION: '{"resourceNames": ["cpu"]}'}
    assert taken_from(scheduler.schedule_one(owner("same-cpu", annotations=cpu_only, cpu=2000, memory=2 * GI))) == "r"


def test_the_affinity_name_overrides_taints_unschedulable_and_selectors() -> None:
    scheduler = make_scheduler(make_node("node-a"))
    taints = [{"key": "k", "effect": "NoExecute"}]
    place(scheduler, reservation("named", {"cpu": "2"}, unschedulable=True, taints=taints))
    doc = affinity(name="named", reservationSelector={"no": "such-label"})
    assert taken_from(scheduler.schedule_one(owner("p", annotations=doc, cpu=1000))) == "named"


def test_the_affinity_selects_on_the_reservation_labels_over_its_node_labels() -> None:
    scheduler = make_scheduler(make_node("node-a", labels={"zone": "a"}), make_node("node-b", labels={"zone": "b"}))
    place(scheduler, reservation("in-a", {"cpu": "1"}, node="node-a"))
    place(scheduler, reservation("in-b", {"cpu": "1"}, node="node-b", labels={"zone": "a"}))
    place(scheduler, reservation("also-b", {"cpu": "1"}, node="node-b"))
    terms = {"reservationSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}
    picked = scheduler.schedule_one(
        owner("p", annotations=affinity(requiredDuringSchedulingIgnoredDuringExecution=terms), cpu=1000)
    )
    # zone=b: only also-b (in-b's own label says zone=a, over its node's zone=b).
    assert (picked.node, taken_from(picked)) == ("node-b", "also-b")
    by_name = {
        "reservationSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["in-a"]}]}]
    }
    picked = scheduler.schedule_one(
        owner("q", annotations=affinity(requiredDuringSchedulingIgnoredDuringExecution=by_name), cpu=1000)
    )
    assert taken_from(picked) == "in-a"


def test_allocate_once_still_ends_at_the_first_owner() -> None:
    scheduler = make_scheduler(make_node("node-1", milli_cpu=8000, memory=32 * GI))
    place(scheduler, reservation("once", {"cpu": "6"}, allocate_once=True))
    assert taken_from(scheduler.schedule_one(owner("first", cpu=2000))) == "once"
    assert taken_from(scheduler.schedule_one(owner("second", cpu=2000))) is None
    assert scheduler.cache.reservations_on("node-1") == []


# --- the promise, under churn -------------------------------------------------------------------------


def test_under_churn_a_shared_gpu_is_never_given_twice_nor_to_a_non_owner() -> None:
    """Owners and non-owners of shares come and go (a fixed seed); after every step: no device is
    over-committed, non-owners never use what is reserved, the Reservation counts exactly what its
    owners left, and a restart (pods and Reservation in either order) counts the same."""
    rng = random.Random(7)
    scheduler = make_scheduler(make_node("node-a", gpus=2, nics_per_switch=0))
    outcome, placed = scheduler.place_reservation(
        reservation("gpu", {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100"}), now=NOW
    )
    [reserved] = allocated(outcome.annotations)["gpu"]
    bound: dict[str, Pod] = {}
    for step in range(120):
        if bound and rng.random() < 0.35:
            name = rng.choice(sorted(bound))
            scheduler.cache.remove_pod(bound.pop(name))
        else:
            share = rng.choice((25, 50, 75, 100))
            name = f"p{step}"
            is_owner = rng.random() < 0.5
            pod = make_pod(name, labels=OWNER if is_owner else None, gpu_core=share, gpu_ratio=share)
            placed_pod = scheduler.schedule_one(pod)
            if placed_pod.node is not None:
                meta = dataclasses.replace(pod.meta, annotations=dict(placed_pod.annotations))
                bound[name] = dataclasses.replace(pod, meta=meta, node_name="node-a", phase="Running")
        usage = {u.minor: u for u in scheduler.cache.device_usage("node-a")}
        assert scheduler.cache.overcommits("node-a") == (), step
        owners = {f"default/{n}" for n, p in bound.items() if names.ANNOTATION_RESERVATION_ALLOCATED in p.annotations}
        on_reserved = usage[reserved].holders
        strangers = sum(h.resources[names.GPU_CORE] for h in on_reserved if h.pod not in owners | {"default/gpu"})
        assert strangers == 0, (step, on_reserved)  # the whole GPU is reserved: no stranger on it
        taken = sum(h.resources[names.GPU_CORE] for h in on_reserved if h.pod in owners)
        [held] = scheduler.cache.reservations_on("node-a")
        left = {a.minor: a.resources.get(names.GPU_CORE, 0) for a in held.allocations.get(GPU, ())}
        assert left.get(reserved, 0) == max(0, 100 - taken), step
    for reservation_first in (True, False):
        again = make_scheduler(make_node("node-a", gpus=2, nics_per_switch=0))
        if reservation_first:
            again.cache.add_reservation(placed)
        for pod in bound.values():
            again.cache.add_pod(pod)
        again.cache.add_reservation(placed)
        assert again.cache.device_usage("node-a") == scheduler.cache.device_usage("node-a"), reservation_first
