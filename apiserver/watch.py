"""Recent changes per resource, for watches: an in-memory ring of events in resourceVersion order.

The registry publishes each committed change here; a watch keeps a cursor (the last
resourceVersion it sent) and reads everything after it. A watch that asks to start before the
retained window gets `410 Gone` and must relist, as with kube-apiserver after etcd compaction, and
so does one that falls so far behind that its cursor leaves the window: a slow watcher costs
memory nowhere but in its own socket buffer. Publishing is O(1) per change however many watchers
there are; each watcher wakes once per batch and sends the whole batch in one write.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Event", "EventLog", "Expired", "WatchHub"]


class Expired(Exception):
    """The requested resourceVersion is older than what the log retains."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


@dataclass(frozen=True, slots=True)
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    obj: Mapping[str, Any]
    body: bytes
    #: The state before a MODIFIED change, so selector watches can turn it into ADDED/DELETED.
    prev: Mapping[str, Any] | None = None
    _lines: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)

    def line(self, kind: str | None = None) -> bytes:
        """The watch-stream line for this event (as `kind`, when a selector changed its type)."""
        kind = kind or self.type
        cached = self._lines.get(kind)
        if cached is None:
            cached = b'{"type":"' + kind.encode() + b'","object":' + self.body + b"}\n"
            self._lines[kind] = cached
        return cached


class EventLog:
    """One resource's retained events. Used on the event loop only."""

    def __init__(self, capacity: int, floor: int) -> None:
        self._capacity = capacity
        self._events: list[Event] = []
        #: Every event with rv > floor is retained.
        self.floor = floor
        self._waiter: asyncio.Future[None] | None = None

    def append(self, events: list[Event]) -> None:
        self._events.extend(events)
        if len(self._events) > 2 * self._capacity:
            drop = len(self._events) - self._capacity
            self.floor = self._events[drop - 1].rv
            del self._events[:drop]
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        self._waiter = None

    def since(self, rv: int) -> list[Event]:
        """Events with resourceVersion > rv; raises Expired when some may have been dropped."""
        if rv < self.floor:
            raise Expired(rv, self.floor)
        if not self._events or self._events[-1].rv <= rv:
            return []
        start = bisect.bisect_right(self._events, rv, key=lambda e: e.rv)
        return self._events[start:]

    def changed(self) -> asyncio.Future[None]:
        """A future resolved at the next append."""
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.get_running_loop().create_future()
        return self._waiter


class WatchHub:
    """The event logs of all resources, and the newest resourceVersion published to them."""

    def __init__(self, capacity: int, start_rv: int) -> None:
        self._capacity = capacity
        self._start_rv = start_rv
        self._logs: dict[str, EventLog] = {}
        #: Every change with rv <= published_rv has been appended to its log.
        self.published_rv = start_rv

    def log(self, storage_id: str) -> EventLog:
        log = self._logs.get(storage_id)
        if log is None:
            # Nothing of this resource has been dropped since start-up: the log is complete from there.
            log = self._logs[storage_id] = EventLog(self._capacity, self._start_rv)
        return log

    def wake_all(self) -> None:
        """Wake every waiting watch (at shutdown, so they notice and end)."""
        for log in self._logs.values():
            log.append([])

    def publish(self, events: Mapping[str, list[Event]], rv: int) -> None:
        for storage_id, batch in events.items():
            self.log(storage_id).append(batch)
        self.published_rv = max(self.published_rv, rv)
