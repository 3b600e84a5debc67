"""Work queue semantics: dedup, one worker per key, delays, rate-limited retries, shutdown."""

import threading
import time
from collections import Counter

from controller.runtime.ratelimit import ItemBackoff
from controller.runtime.workqueue import WorkQueue
from tests.support.clocks import FakeClock
from tests.support.waiting import wait_for


def drain(queue: WorkQueue[str]) -> list[str]:
    """Every key ready now, each marked done."""
    keys = []
    while (key := queue.get(timeout=0)) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def test_keys_come_out_in_order_and_once_however_often_added(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    for key in ["a", "b", "a", "c", "b", "a"]:
        queue.add(key)
    assert len(queue) == 3
    assert drain(queue) == ["a", "b", "c"]
    assert queue.get(timeout=0) is None


def test_a_key_being_processed_is_not_handed_out_again_until_done(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a")  # an event while a worker reconciles it
    queue.add("a")
    assert queue.get(timeout=0) is None  # no second worker on "a"
    assert queue.processing == 1
    queue.done("a")
    assert drain(queue) == ["a"]  # once more, for the newer state
    assert queue.get(timeout=0) is None


def test_done_without_a_new_add_does_not_requeue(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    key = queue.get(timeout=0)
    assert key == "a"
    queue.done(key)
    assert queue.get(timeout=0) is None
    assert queue.processing == 0


def test_add_after_holds_the_key_until_its_time(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("late", 10)
    queue.add_after("soon", 1)
    assert queue.get(timeout=0) is None
    assert queue.delayed == 2
    clock.advance(1)
    assert drain(queue) == ["soon"]
    clock.advance(9)
    assert drain(queue) == ["late"]
    assert queue.delayed == 0


def test_the_earliest_time_wins_for_a_key_added_after_twice(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 10)
    queue.add_after("a", 2)
    queue.add_after("a", 5)  # later than the pending 2: ignored
    clock.advance(2)
    assert drain(queue) == ["a"]
    clock.advance(20)
    assert drain(queue) == []  # the superseded entries do not bring it back


def test_a_delayed_key_already_queued_comes_out_once(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    queue.add_after("a", 1)
    clock.advance(1)
    assert drain(queue) == ["a"]


def test_add_after_zero_is_an_add(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 0)
    assert drain(queue) == ["a"]


def test_rate_limited_retries_back_off_per_key_until_forgotten(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(rate_limiter=ItemBackoff(base=1, maximum=8), clock=clock)
    waits = []
    for _ in range(5):
        queue.add_rate_limited("a")
        start = clock.now
        while not drain(queue):
            clock.advance(0.5)
        waits.append(clock.now - start)
    assert waits == [1, 2, 4, 8, 8]
    assert queue.failures("a") == 5
    queue.forget("a")
    queue.add_rate_limited("a")
    clock.advance(1)
    assert drain(queue) == ["a"]


def test_shutdown_wakes_a_blocked_worker_and_stops_handing_out_keys() -> None:
    queue: WorkQueue[str] = WorkQueue()
    got: list[str | None] = []
    worker = threading.Thread(target=lambda: got.append(queue.get()))
    worker.start()
    queue.shutdown()
    worker.join(10)
    assert not worker.is_alive()
    assert got == [None]
    queue.add("a")
    assert queue.get(timeout=0) is None
    assert len(queue) == 0


def test_a_blocked_worker_wakes_for_a_delayed_key() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0.05)
    assert queue.get(timeout=30) == "a"  # returns as soon as the key is due, long before 30 s


def test_get_with_a_timeout_returns_none_when_nothing_comes() -> None:
    queue: WorkQueue[str] = WorkQueue()
    assert queue.get(timeout=0.01) is None


def test_many_workers_never_hold_the_same_key_at_once() -> None:
    queue: WorkQueue[int] = WorkQueue()
    holding: set[int] = set()
    lock = threading.Lock()
    overlaps: list[int] = []
    processed: Counter[int] = Counter()

    def work() -> None:
        while (key := queue.get()) is not None:
            with lock:
                if key in holding:
                    overlaps.append(key)
                holding.add(key)
            time.sleep(0)  # let other workers run while this one holds the key
            with lock:
                holding.discard(key)
                processed[key] += 1
            queue.done(key)

    workers = [threading.Thread(target=work) for _ in range(8)]
    for w in workers:
        w.start()
    for round_ in range(200):
        for key in range(10):
            queue.add(key)
        if round_ % 20 == 0:
            time.sleep(0)
    wait_for(lambda: not (len(queue) or queue.processing), poll_s=0.001, what="every key processed")
    queue.shutdown()
    for w in workers:
        w.join(10)
    assert overlaps == []
    assert set(processed) == set(range(10))  # every key was processed at least once
