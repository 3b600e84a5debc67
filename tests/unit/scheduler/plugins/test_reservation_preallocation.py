"""The pure rules of Reservation pre-allocation (`scheduler.plugins.reservation.preallocation`)
and the API fields they read (`spec.preAllocation`, `spec.preAllocationPolicy`, Tessera's
`pre-allocated` record)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from apis.crds.reservation import Reservation, pre_allocated_annotation
from apis.errors import ValidationError
from apis.extension import names
from scheduler.cache import NodeInfo, PodInfo
from scheduler.plugins.reservation import preallocation
from tests.support.builders import make_node, make_pod, make_reservation

OWNER = {"app": "my-app"}


def reservation(requests: Mapping[str, str], **spec: Any) -> Reservation:
    raw = make_reservation("r", requests=requests, owner_labels=OWNER).to_dict()
    raw["spec"].update({"preAllocation": True, **spec})
    raw.pop("status")
    return Reservation.from_dict(raw)


def node(milli_cpu: int, *pods: PodInfo) -> NodeInfo:
    info = NodeInfo("n")
    info.node = make_node("n", milli_cpu=milli_cpu)[0]
    for pod in pods:
        info.add_pod(pod)
    return info


def pod(name: str, cpu: int, *, priority: str = "", labels: Mapping[str, str] = OWNER) -> PodInfo:
    annotations = {names.ANNOTATION_POD_PRE_ALLOCATABLE_PRIORITY: priority} if priority else {}
    return PodInfo.of(make_pod(name, node="n", labels=labels, annotations=annotations, cpu=cpu))


def test_the_policy_is_read_and_written_back_and_a_bad_mode_is_refused() -> None:
    r = reservation({"cpu": "1"}, preAllocationPolicy={"mode": "Cluster", "enableMultiple": True})
    assert (r.pre_allocation, r.pre_allocation_mode, r.pre_allocate_multiple) == (True, "Cluster", True)
    assert Reservation.from_dict(r.to_dict()) == r
    assert reservation({"cpu": "1"}).pre_allocation_mode == "Default"
    with pytest.raises(ValidationError, match="spec.preAllocationPolicy.mode"):
        reservation({"cpu": "1"}, preAllocationPolicy={"mode": "Nodes"})


def test_the_pre_allocated_record_round_trips_and_a_malformed_one_is_refused() -> None:
    taken = make_pod("a", labels=OWNER)
    raw = reservation({"cpu": "1"}).to_dict()
    raw["metadata"]["annotations"] = {names.ANNOTATION_PRE_ALLOCATED: pre_allocated_annotation([taken])}
    r = Reservation.from_dict(raw)
    assert r.is_pre_allocated(taken) and not r.is_pre_allocated(make_pod("b"))
    raw["metadata"]["annotations"] = {names.ANNOTATION_PRE_ALLOCATED: json.dumps([{"name": "a"}])}
    with pytest.raises(ValidationError, match="uid"):
        Reservation.from_dict(raw)
    raw["metadata"]["annotations"] = {names.ANNOTATION_PRE_ALLOCATED: "{"}
    with pytest.raises(ValidationError, match="pre-allocated"):
        Reservation.from_dict(raw)


def test_candidates_by_mode() -> None:
    labelled = make_pod("batch", labels={names.LABEL_POD_PRE_ALLOCATABLE: "true"})
    owner = make_pod("mine", labels=OWNER)
    default, cluster = reservation({"cpu": "1"}), reservation({"cpu": "1"}, preAllocationPolicy={"mode": "Cluster"})
    assert preallocation.candidate(default, owner) and not preallocation.candidate(default, labelled)
    assert preallocation.candidate(cluster, labelled) and not preallocation.candidate(cluster, owner)


def test_order_is_priority_then_the_tightest_fit_then_name() -> None:
    r = reservation({"cpu": "2"})
    pods = [pod("c", 500), pod("b", 1500), pod("a", 1500), pod("z", 100, priority="7"), pod("y", 100, priority="x")]
    assert [p.pod.meta.name for p in preallocation.order(r, pods)] == ["z", "a", "b", "c", "y"]


def test_one_pod_within_the_reservation_that_leaves_the_node_room() -> None:
    r = reservation({"cpu": "2"})
    big, fits = pod("big", 3000), pod("fits", 2000)
    # Too big for the Reservation: never taken.
    assert preallocation.select(r, node(8000, big), [big]) == ()
    # On a full node, only a pod whose 2 CPUs become the Reservation's leaves room.
    full = node(4000, pod("other", 2000), fits)
    assert preallocation.select(r, full, [fits]) == (fits,)
    small = pod("small", 1000)
    assert preallocation.select(r, node(4000, pod("other", 2000), small, pod("x", 1000)), [small]) == ()


def test_several_pods_until_they_make_up_the_reservation_skipping_overflow() -> None:
    r = reservation({"cpu": "2"}, preAllocationPolicy={"enableMultiple": True})
    one, big, two, three = pod("one", 1000), pod("big", 1500), pod("two", 1000), pod("three", 1000)
    info = node(4500, one, big, two, three)  # full: room only once two pods are the Reservation's
    assert preallocation.select(r, info, [one, big, two, three]) == (one, two)
    # Not room enough even with every fitting pod taken over: none.
    assert preallocation.select(r, node(3000, one, pod("other", 2000)), [one]) == ()


def test_required_is_a_label_on_the_reservation() -> None:
    raw = reservation({"cpu": "1"}).to_dict()
    assert not preallocation.required(Reservation.from_dict(raw))
    raw["metadata"]["labels"] = {names.LABEL_PRE_ALLOCATION_REQUIRED: "true"}
    assert preallocation.required(Reservation.from_dict(raw))
