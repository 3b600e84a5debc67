"""The scheduling queue: order, backoff, unschedulable pods and the events that move them."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from apis.k8s.core import Pod
from scheduler.framework.interfaces import ClusterEvent, EventAction, EventResource
from scheduler.service.queue import QueueName, SchedulingQueue
from tests.support.builders import make_pod
from tests.support.clocks import FakeClock

NODE_ADD = ClusterEvent(EventResource.NODE, EventAction.ADD)
DEVICE_UPDATE = ClusterEvent(EventResource.DEVICE, EventAction.UPDATE)


def device_plugins_only(plugins: frozenset[str], event: ClusterEvent) -> bool:
    """DeviceShare cares about Device events; everything else about nodes."""
    return ("DeviceShare" in plugins) == (event.resource == EventResource.DEVICE)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(100.0)


@pytest.fixture
def queue(clock: FakeClock) -> SchedulingQueue:
    return SchedulingQueue(interest=device_plugins_only, clock=clock, initial_backoff=1.0, max_backoff=10.0)


def prio(name: str, priority: int) -> Pod:
    return dataclasses.replace(make_pod(name), priority=priority)


def popped(queue: SchedulingQueue) -> list[str]:
    out = []
    while (entry := queue.pop(timeout=0)) is not None:
        out.append(entry.pod.name)
    return out


def test_priority_then_first_in_first_out(queue: SchedulingQueue, clock: FakeClock) -> None:
    for i, (name, priority) in enumerate([("a", 0), ("b", 10), ("c", 0), ("d", 10), ("e", 5)]):
        clock.now = 100.0 + i
        queue.add(prio(name, priority))
    assert popped(queue) == ["b", "d", "e", "a", "c"]


def test_a_popped_pod_is_in_flight_until_done(queue: SchedulingQueue) -> None:
    queue.add(make_pod("a"))
    entry = queue.pop(timeout=0)
    assert entry is not None and entry.attempts == 1 and entry.where is QueueName.SCHEDULING
    queue.add(make_pod("a"))  # an update while in flight does not queue it twice
    assert queue.pop(timeout=0) is None
    queue.mark(entry.uid, QueueName.BINDING)
    assert queue.lengths()[QueueName.BINDING] == 1
    assert queue.done(entry.uid) is entry
    assert sum(queue.lengths().values()) == 0


def test_errors_back_off_exponentially_up_to_the_cap(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(make_pod("a"))
    waits = []
    for _ in range(6):
        entry = queue.pop(timeout=0)
        assert entry is not None
        queue.requeue(entry.uid, unschedulable=False, message="boom")
        start = clock.now
        assert queue.pop(timeout=0) is None  # backing off
        snapshot = queue.get(entry.uid)
        assert snapshot is not None and snapshot.queue is QueueName.BACKOFF and snapshot.message == "boom"
        clock.now = start + snapshot.backoff_seconds
        waits.append(snapshot.backoff_seconds)
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_unschedulable_pods_wait_for_an_event_of_a_plugin_that_rejected_them(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(make_pod("gpu"))
    queue.add(make_pod("taint"))
    popped_pods = [queue.pop(timeout=0), queue.pop(timeout=0)]
    for entry, plugin in zip(popped_pods, ["DeviceShare", "TaintToleration"], strict=True):
        assert entry is not None
        queue.requeue(entry.uid, unschedulable=True, plugins={plugin}, message=f"{plugin} says no")
    clock.now += 60  # long past any backoff
    assert popped(queue) == []
    assert queue.lengths()[QueueName.UNSCHEDULABLE] == 2
    assert queue.move(DEVICE_UPDATE) == 1
    assert popped(queue) == ["gpu"]
    assert queue.move(NODE_ADD) == 1
    assert popped(queue) == ["taint"]


def test_an_event_during_backoff_leaves_the_pod_in_backoff(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(make_pod("a"))
    entry = queue.pop(timeout=0)
    assert entry is not None
    queue.requeue(entry.uid, unschedulable=True, plugins={"DeviceShare"})
    queue.move(DEVICE_UPDATE)
    assert queue.get(entry.uid).queue is QueueName.BACKOFF  # type: ignore[union-attr]
    assert popped(queue) == []
    clock.now += 1.0
    assert popped(queue) == ["a"]


def test_an_event_while_in_flight_sends_a_failure_to_backoff_not_unschedulable(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(make_pod("a"))
    entry = queue.pop(timeout=0)
    assert entry is not None
    queue.move(DEVICE_UPDATE)  # e.g. a GPU came back while the cycle ran
    queue.requeue(entry.uid, unschedulable=True, plugins={"DeviceShare"})
    assert queue.get(entry.uid).queue is QueueName.BACKOFF  # type: ignore[union-attr]
    clock.now += 1.0
    assert popped(queue) == ["a"]


def test_unschedulable_pods_are_retried_after_the_maximum_wait(clock: FakeClock) -> None:
    queue = SchedulingQueue(interest=device_plugins_only, clock=clock, max_unschedulable=60.0)
    queue.add(make_pod("a"))
    entry = queue.pop(timeout=0)
    assert entry is not None
    queue.requeue(entry.uid, unschedulable=True, plugins={"DeviceShare"})
    clock.now += 59
    assert popped(queue) == []
    clock.now += 31  # the flush runs every 30 s
    assert popped(queue) == ["a"]


def test_a_changed_pod_leaves_the_unschedulable_queue(queue: SchedulingQueue, clock: FakeClock) -> None:
    pod = make_pod("a")
    queue.add(pod)
    entry = queue.pop(timeout=0)
    assert entry is not None
    queue.requeue(entry.uid, unschedulable=True, plugins={"DeviceShare"})
    clock.now += 30
    queue.add(pod)  # the same pod again (a status update): nothing changes
    assert popped(queue) == []
    queue.add(make_pod("a", annotations={"x": "y"}))
    assert popped(queue) == ["a"]


def test_a_pod_that_must_change_waits_for_itself_not_for_cluster_events(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(make_pod("bad"))
    entry = queue.pop(timeout=0)
    assert entry is not None
    queue.move(DEVICE_UPDATE)  # an event while in flight would send another failure to backoff
    queue.requeue(entry.uid, unschedulable=True, message="invalid device request", until_pod_changes=True)
    clock.now += 60
    assert queue.move(DEVICE_UPDATE) == 0
    assert queue.move(NODE_ADD) == 0
    assert popped(queue) == []
    assert queue.get(entry.uid).queue is QueueName.UNSCHEDULABLE  # type: ignore[union-attr]
    queue.add(make_pod("bad", annotations={"fixed": "yes"}))
    assert popped(queue) == ["bad"]


def test_deleted_pods_are_skipped_and_failures_of_deleted_pods_dropped(queue: SchedulingQueue) -> None:
    queue.add(make_pod("a"))
    queue.add(make_pod("b"))
    queue.delete("uid-default-a")
    entry = queue.pop(timeout=0)
    assert entry is not None and entry.pod.name == "b"
    queue.delete(entry.uid)
    queue.requeue(entry.uid, unschedulable=True)
    assert sum(queue.lengths().values()) == 0


def test_pending_lists_every_pod_with_where_it_waits(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(make_pod("a"))
    queue.add(make_pod("b"))
    entry = queue.pop(timeout=0)
    assert entry is not None
    queue.requeue(entry.uid, unschedulable=True, plugins={"DeviceShare"}, message="0/2 nodes are available")
    clock.now += 5
    listed = {p.key: p for p in queue.pending()}
    assert listed["default/a"].queue is QueueName.UNSCHEDULABLE
    assert listed["default/a"].message == "0/2 nodes are available"
    assert listed["default/a"].waiting_seconds == 5.0
    assert listed["default/b"].queue is QueueName.ACTIVE and listed["default/b"].attempts == 0


def test_pop_blocks_until_a_pod_arrives_and_close_wakes_it(queue: SchedulingQueue) -> None:
    got: list[str | None] = []
    arrived = threading.Event()

    def consumer() -> None:
        arrived.set()
        entry = queue.pop()
        got.append(entry.pod.name if entry is not None else None)
        got.append("closed" if queue.pop() is None else "?")

    thread = threading.Thread(target=consumer)
    thread.start()
    arrived.wait(10)
    queue.add(make_pod("a"))
    queue.close()
    thread.join(10)
    assert got == ["a", "closed"]


def test_a_gang_groups_members_are_popped_together(clock: FakeClock) -> None:
    groups = {"a-0": "ns/a", "a-1": "ns/a", "b-0": "ns/b", "b-1": "ns/b"}
    queue = SchedulingQueue(interest=device_plugins_only, clock=clock, group_of=lambda pod: groups.get(pod.name))
    for name in ("a-0", "b-0", "solo", "a-1", "b-1"):
        queue.add(make_pod(name))
        clock.now += 1
    assert popped(queue) == ["a-0", "a-1", "b-0", "b-1", "solo"]


def test_activate_moves_unschedulable_and_backing_off_pods_to_active(queue: SchedulingQueue) -> None:
    for name in ("waits", "backs-off", "active"):
        queue.add(make_pod(name))
    for entry in (queue.pop(timeout=0), queue.pop(timeout=0)):
        assert entry is not None
        queue.requeue(entry.uid, unschedulable=entry.pod.name == "waits", plugins=("DeviceShare",))
    assert queue.activate(["uid-default-waits", "uid-default-backs-off", "uid-default-active", "gone"]) == 2
    assert sorted(popped(queue)) == ["active", "backs-off", "waits"]


def test_activate_after_backoff_waits_for_the_backoff_then_makes_them_active(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    for name in ("waits", "backs-off"):
        queue.add(make_pod(name))
    for entry in (queue.pop(timeout=0), queue.pop(timeout=0)):
        assert entry is not None
        queue.requeue(entry.uid, unschedulable=entry.pod.name == "waits", plugins=("DeviceShare",))
    assert queue.activate(["uid-default-waits", "uid-default-backs-off"], after_backoff=True) == 2
    assert popped(queue) == []  # both still back off (1 s after their first attempt)
    clock.now += 1.0
    assert sorted(popped(queue)) == ["backs-off", "waits"]


def test_a_group_whose_members_all_left_starts_afresh(clock: FakeClock) -> None:
    # The queue keeps a group's place only while it has members: a gang that was scheduled and a
    # new gang of the same name later are not ordered by the old one's arrival.
    groups = {"a-0": "ns/a", "a-1": "ns/a"}
    queue = SchedulingQueue(interest=device_plugins_only, clock=clock, group_of=lambda pod: groups.get(pod.name))
    queue.add(make_pod("a-0"))
    entry = queue.pop(timeout=0)
    assert entry is not None
    queue.done(entry.uid)
    clock.now += 1
    queue.add(make_pod("solo"))
    clock.now += 1
    queue.add(make_pod("a-1"))
    assert popped(queue) == ["solo", "a-1"]
