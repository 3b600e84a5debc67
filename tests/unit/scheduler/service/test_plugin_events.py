"""Plugins' feeds and events, as the live scheduler runs them: the handlers a plugin registered
through `Handle.feeds`, called as the feed runner calls them, and what their events do to the
queue — a placed Reservation wakes its waiting owners (and no one else), one released the pods
that wait for room, each counted under its own name.
"""

from __future__ import annotations

from typing import Any

from apis.errors import TesseraError
from apis.extension import names
from apis.k8s.core import Pod
from kube.quotas import QuotaManager
from scheduler.cache import ClusterCache
from scheduler.core import build_frameworks, reservations, with_elastic_quota
from scheduler.framework import SchedulerConfig, load_config
from scheduler.framework.events import ClusterEvent, EventAction, EventResource
from scheduler.framework.feeds import About, Feeds, Handlers
from scheduler.plugins.elasticquota import QUOTA_MANAGER
from scheduler.service.queue import QueueName, SchedulingQueue
from tests.support.builders import make_node, make_pod, make_reservation
from tests.support.clocks import FakeClock
from tests.support.scheduling import make_cache

NOW = "2026-01-01T00:00:00Z"


class Warnings:
    def __init__(self) -> None:
        self.said: list[tuple[str, str]] = []

    def warning(self, about: About, reason: str, message: str) -> None:
        self.said.append((reason, message))


def room_freed(plugins: frozenset[str], event: ClusterEvent) -> bool:
    """As NodeResourcesFit's interest would be: pod deletions (room freed) only."""
    return event.resource == EventResource.POD and bool(event.action & EventAction.DELETE)


def handlers_of(feeds: Feeds, resource: object) -> list[Handlers[Any]]:
    return [h for watch, handlers in feeds.opened() for h in handlers if watch.resource == resource]


def setup(
    cache: ClusterCache, config: SchedulerConfig | None = None, **shared: object
) -> tuple[Feeds, SchedulingQueue, list[tuple[str, int]]]:
    feeds = Feeds()
    build_frameworks(config or SchedulerConfig(), cache, feeds=feeds, shared=shared)
    moved: list[tuple[str, int]] = []
    queue = SchedulingQueue(
        interest=room_freed, clock=FakeClock(100.0), moved=lambda event, n: moved.append((event, n))
    )
    feeds.connect(sink=lambda event, concerns: queue.move(event, concerns=concerns), recorder=Warnings())
    return feeds, queue, moved


def unschedulable(queue: SchedulingQueue, *pods: Pod) -> None:
    for pod in pods:
        queue.add(pod)
        entry = queue.pop(timeout=0)
        assert entry is not None
        queue.requeue(entry.uid, unschedulable=True, plugins=frozenset({"NodeResourcesFit"}), message="no room")


def where(queue: SchedulingQueue, name: str) -> QueueName:
    entry = queue.get(f"uid-default-{name}")
    assert entry is not None
    return entry.queue


def test_a_placed_reservation_wakes_its_waiting_owners_and_no_one_else() -> None:
    cache = make_cache(make_node("n1"))
    feeds, queue, moved = setup(cache)
    owner = make_pod("owner", labels={"app": "train"}, nvidia_gpu=8)
    stranger = make_pod("stranger", nvidia_gpu=8)
    unschedulable(queue, owner, stranger)
    pending = make_reservation(requests={names.NVIDIA_GPU: "8"})
    placed = reservations.placed(pending, node="n1", now=NOW)
    for handlers in handlers_of(feeds, names.RESERVATIONS):
        handlers.added(pending)
    assert moved == []  # pending: nothing to wake anyone for
    for handlers in handlers_of(feeds, names.RESERVATIONS):
        handlers.updated(pending, placed)
    assert [h.name for h in cache.reservations_on("n1")] == ["r"]
    assert where(queue, "owner") is not QueueName.UNSCHEDULABLE
    assert where(queue, "stranger") is QueueName.UNSCHEDULABLE  # its room is the owner's, not its own
    assert moved == [("ReservationPlaced", 1)]


def test_a_released_reservation_moves_the_pods_that_wait_for_room() -> None:
    cache = make_cache(make_node("n1"))
    feeds, queue, moved = setup(cache)
    placed = reservations.placed(make_reservation(requests={names.NVIDIA_GPU: "8"}), node="n1", now=NOW)
    for handlers in handlers_of(feeds, names.RESERVATIONS):
        handlers.added(placed)
    unschedulable(queue, make_pod("stranger", nvidia_gpu=8))
    for handlers in handlers_of(feeds, names.RESERVATIONS):
        handlers.deleted(placed)
    assert cache.reservations_on("n1") == []
    assert where(queue, "stranger") is not QueueName.UNSCHEDULABLE
    assert moved == [("ReservationReleased", 1)]


def test_elastic_quota_follows_the_reservations_it_charged_only_when_they_are_watched() -> None:
    manager = QuotaManager()
    feeds, _, _ = setup(make_cache(make_node("n1")), with_elastic_quota(SchedulerConfig()), **{QUOTA_MANAGER: manager})
    placed = reservations.placed(make_reservation(requests={names.NVIDIA_GPU: "8"}), node="n1", now=NOW)
    reserve_pod = placed.reserve_pod()
    manager.reserve(reserve_pod)
    quota = manager.quota_of(reserve_pod)
    assert manager.request(quota).get(names.GPU_CORE) == 800
    assert len(handlers_of(feeds, names.RESERVATIONS)) == 2  # the Reservation plugin's and ElasticQuota's
    for handlers in handlers_of(feeds, names.RESERVATIONS):
        handlers.deleted(placed)
    assert not manager.request(quota).get(names.GPU_CORE)

    # Without the Reservation plugin no one opens the watch: ElasticQuota's handlers alone do not.
    alone = Feeds()
    without = load_config("profiles: [{plugins: {multiPoint: {disabled: [{name: Reservation}]}}}]")
    build_frameworks(with_elastic_quota(without), make_cache(), feeds=alone)
    assert handlers_of(alone, names.RESERVATIONS) == []
    opened = [watch.resource for watch, _ in alone.opened()]
    assert names.ELASTIC_QUOTAS in opened and names.RESERVATIONS not in opened


def test_an_invalid_quota_is_said_on_the_quota() -> None:
    feeds, _, _ = setup(make_cache(), with_elastic_quota(SchedulerConfig()))
    warnings = Warnings()
    feeds.connect(sink=lambda event, concerns: None, recorder=warnings)
    (handlers,) = handlers_of(feeds, names.ELASTIC_QUOTAS)
    handlers.invalid({"metadata": {"name": "team", "namespace": "q"}}, TesseraError("spec.max: bad quantity"))
    message = "the scheduler cannot read this ElasticQuota; it keeps the last valid version: spec.max: bad quantity"
    assert warnings.said == [("InvalidElasticQuota", message)]
