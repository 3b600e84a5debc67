"""The watch event log: ordered reads after a cursor, and 410 once a cursor leaves the window."""

import asyncio

import pytest

from apiserver.watch import Event, EventLog, Expired, WatchHub


def event(rv: int) -> Event:
    return Event(rv, "ADDED", {"metadata": {"resourceVersion": str(rv)}}, b"{}")


def test_since_returns_events_after_the_cursor() -> None:
    log = EventLog(capacity=10, floor=5)
    log.append([event(6), event(8), event(9)])
    assert [e.rv for e in log.since(5)] == [6, 8, 9]
    assert [e.rv for e in log.since(7)] == [8, 9]
    assert log.since(9) == []
    with pytest.raises(Expired):
        log.since(4)


def test_window_drops_oldest_and_raises_the_floor() -> None:
    log = EventLog(capacity=3, floor=0)
    log.append([event(i) for i in range(1, 8)])
    assert log.floor == 4
    assert [e.rv for e in log.since(4)] == [5, 6, 7]
    with pytest.raises(Expired) as e:
        log.since(3)
    assert "too old resource version: 3 (4)" in str(e.value)


def test_appending_wakes_waiters() -> None:
    async def scenario() -> bool:
        log = EventLog(capacity=3, floor=0)
        changed = log.changed()
        assert not changed.done()
        log.append([event(1)])
        return changed.done()

    assert asyncio.run(scenario())


def test_hub_logs_start_complete_from_startup() -> None:
    hub = WatchHub(capacity=10, start_rv=100)
    assert hub.log("pods").floor == 100
    hub.publish({"pods": [event(101)]}, 101)
    assert hub.published_rv == 101 and [e.rv for e in hub.log("pods").since(100)] == [101]
    assert event(1).line("DELETED") == b'{"type":"DELETED","object":{}}\n'
