"""The cache's Reservation book: which held Reservation a pod may use, through its owner index."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from apis.crds.reservation import Reservation
from apis.extension import names
from apis.k8s.meta import OwnerReference
from scheduler.cache import PodInfo
from scheduler.core import Scheduler
from tests.support.builders import make_node, make_pod, make_reservation
from tests.support.scheduling import make_scheduler

NOW = "2026-01-01T00:00:00Z"


def with_owners(owners: list[dict[str, Any]], name: str) -> Reservation:
    raw = make_reservation(name, requests={"cpu": "1"}).to_dict()
    raw["spec"]["owners"] = owners
    return Reservation.from_dict(raw)


OWNERS = {
    "labels": [{"labelSelector": {"matchLabels": {"app": "a", "tier": "x"}}}],
    "expression": [{"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]}}],
    "pod-name": [{"object": {"name": "mine", "namespace": "default"}}],
    "controller": [{"controller": {"kind": "ReplicaSet", "name": "rs-1", "uid": "rs-uid"}}],
}


@pytest.fixture
def scheduler() -> Scheduler:
    scheduler = make_scheduler(make_node("node-a"))
    for kind, owners in OWNERS.items():
        scheduler.place_reservation(with_owners(owners, kind), now=NOW)
    return scheduler


def test_each_kind_of_owner_finds_its_pods_and_only_them(scheduler: Scheduler) -> None:
    cache = scheduler.cache
    assert {h.name for h in cache.reservations_on("node-a")} == set(OWNERS)
    labelled = PodInfo.of(make_pod("p", labels={"app": "a", "tier": "x"}))
    # Per node, every one it matches, by name (labels and the expression both match).
    assert [h.name for h in cache.reservations_for(labelled)["node-a"]] == ["expression", "labels"]
    only_app = PodInfo.of(make_pod("p", labels={"app": "a"}))
    assert [h.name for h in cache.reservations_for(only_app)["node-a"]] == ["expression"]
    assert [h.name for h in cache.reservations_for(PodInfo.of(make_pod("mine")))["node-a"]] == ["pod-name"]
    owned = make_pod("q")
    refs = (OwnerReference("apps/v1", "ReplicaSet", "rs-1", "rs-uid", True),)
    owned = dataclasses.replace(owned, meta=dataclasses.replace(owned.meta, owner_references=refs))
    assert [h.name for h in cache.reservations_for(PodInfo.of(owned))["node-a"]] == ["controller"]
    assert cache.reservations_for(PodInfo.of(make_pod("stranger", labels={"tier": "x"}))) == {}


def test_released_reservations_leave_the_index(scheduler: Scheduler) -> None:
    cache = scheduler.cache
    for held in list(cache.held_reservations()):
        cache.remove_reservation(held.uid)
    assert cache.reservations_for(PodInfo.of(make_pod("mine", labels={"app": "a", "tier": "x"}))) == {}
    assert cache.held_reservations() == []


def test_a_pod_of_a_reservation_that_ended_leaves_no_record_when_it_goes() -> None:
    scheduler = make_scheduler(make_node("node-a"))
    annotations = {names.ANNOTATION_RESERVATION_ALLOCATED: '{"name": "gone", "uid": "uid-gone"}'}
    pod = make_pod("late", node="node-a", annotations=annotations)
    scheduler.cache.add_pod(pod)  # after a restart: its Reservation was deleted long ago
    assert scheduler.cache.consumed_reservation(pod.uid) == "uid-gone"
    scheduler.cache.remove_pod(pod)
    assert scheduler.cache.consumed_reservation(pod.uid) is None
