"""Fair sharing of the server between identities, in the spirit of API Priority and Fairness.

kube-apiserver classifies each request by who sent it into a priority level, and within a level
queues each identity (flow) separately and dispatches fairly between them, so one client cannot
take what the others need. The same here, kept small:

| level | who | seats |
| --- | --- | --- |
| `exempt` | `system:masters` (the administrator) | never limited |
| `system` | `system:nodes`, ServiceAccounts of `kube-system` and `tessera-system` (the components) | `system_seats` |
| `workload-low` | other ServiceAccounts | `workload_seats` |
| `global-default` | every other user | `default_seats` |

A request takes one seat of its level while it runs (a watch only while it starts: streaming
takes none, but each user may hold at most `max_watches_per_user` watches). Seats do not bound
what one request costs the event loop: decoding a body is work in proportion to its nodes (about
20 ms for a MiB of small JSON values, all of it on the loop). So the bodies of `workload-low` and
`global-default` users are charged to a budget of nodes per user (`estimated_nodes`: values, or
bytes when they weigh more; `body_nodes_per_second`, up to
`body_nodes_burst` saved): while it is overdrawn, the user's next body is not read (its upload
stalls in TCP) until it is refilled, or is a 429 past `queue_timeout`. Ordinary objects never
notice (a pod is about a hundred nodes), but a client posting megabytes of JSON gets the loop a
few times a minute instead of continuously. One flow holds at
most a quarter of its level's seats; what waits queues per flow (at most `queue_length` each)
and a freed seat goes to the flow that holds the fewest, oldest waiter first. A request that finds
its queue full, or waits longer than `queue_timeout`, is refused as kube refuses it: 429
`TooManyRequests` with `Retry-After`. So a client flooding the server queues behind itself: the
administrator is never held back, and the components and other users keep their seats.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from apiserver.authz.identity import MASTERS, SERVICE_ACCOUNT_PREFIX, User
from apiserver.errors import StatusError
from kube.logs import V

__all__ = ["FlowControl", "FlowSettings", "classify", "estimated_nodes"]

log = logging.getLogger(__name__)

EXEMPT = "exempt"
SYSTEM = "system"
WORKLOAD_LOW = "workload-low"
GLOBAL_DEFAULT = "global-default"
_SYSTEM_NAMESPACES = ("kube-system", "tessera-system")
_TOO_MANY = "Too many requests, please try again later."
_MAX_BUDGETS = 10_000


@dataclass(frozen=True, slots=True)
class FlowSettings:
    system_seats: int = 200
    workload_seats: int = 100
    default_seats: int = 100
    #: Requests one flow may have waiting (beyond that: 429 at once).
    queue_length: int = 50
    #: Longest wait in a queue before a 429.
    queue_timeout: float = 15.0
    #: Open watches per user (not for system:masters).
    max_watches_per_user: int = 1000
    #: Body nodes (estimated) a `workload-low` or `global-default` user may send per second, and save up.
    body_nodes_per_second: float = 50_000.0
    body_nodes_burst: float = 500_000.0


_BUDGETED = frozenset({"workload-low", "global-default"})


#: What a body's bytes cost the loop, in nodes: a body of a few long strings has few values, but
#: the loop still reads it, decodes it (or the YAML worker's answer) and often encodes it back (a
#: review echoes its spec): about a node's worth of work for every 32 bytes.
BYTES_PER_NODE = 32


def estimated_nodes(body: bytes) -> int:
    """About how much work decoding `body` is, in values (commas, colons and line ends: each value
    but the first follows one; at least one per `BYTES_PER_NODE` bytes), counted at C speed without
    decoding anything."""
    values = body.count(b",") + body.count(b":") + body.count(b"\n") + 1
    return max(values, len(body) // BYTES_PER_NODE)


def classify(user: User) -> str:
    """The priority level of `user`'s requests."""
    if MASTERS in user.groups:
        return EXEMPT
    if "system:nodes" in user.groups:
        return SYSTEM
    if user.name.startswith(SERVICE_ACCOUNT_PREFIX):
        namespace = user.name.removeprefix(SERVICE_ACCOUNT_PREFIX).split(":", 1)[0]
        return SYSTEM if namespace in _SYSTEM_NAMESPACES else WORKLOAD_LOW
    return GLOBAL_DEFAULT


class _Level:
    """One priority level: seats, and a FIFO of waiters per flow."""

    def __init__(self, name: str, seats: int) -> None:
        self.name = name
        self.seats = seats
        self.per_flow = max(1, seats // 4)
        self.busy = 0
        self.held: collections.Counter[str] = collections.Counter()
        self.queues: dict[str, collections.deque[asyncio.Future[None]]] = {}

    def can_run(self, flow: str) -> bool:
        return self.busy < self.seats and self.held[flow] < self.per_flow

    def take(self, flow: str) -> None:
        self.busy += 1
        self.held[flow] += 1

    def give_back(self, flow: str) -> None:
        self.busy -= 1
        self.held[flow] -= 1
        if not self.held[flow]:
            del self.held[flow]
        self.dispatch()

    def dispatch(self) -> None:
        """Hand free seats to waiting flows: the one holding fewest seats first."""
        while self.busy < self.seats:
            ready = [f for f, q in self.queues.items() if q and self.held[f] < self.per_flow]
            if not ready:
                return
            flow = min(ready, key=lambda f: self.held[f])
            waiter = self.queues[flow].popleft()
            if not self.queues[flow]:
                del self.queues[flow]
            if waiter.done():  # gave up waiting
                continue
            self.take(flow)
            waiter.set_result(None)


class FlowControl:
    def __init__(self, settings: FlowSettings | None = None) -> None:
        self.settings = settings or FlowSettings()
        s = self.settings
        self._levels = {
            SYSTEM: _Level(SYSTEM, s.system_seats),
            WORKLOAD_LOW: _Level(WORKLOAD_LOW, s.workload_seats),
            GLOBAL_DEFAULT: _Level(GLOBAL_DEFAULT, s.default_seats),
        }
        self._watches: collections.Counter[str] = collections.Counter()
        self._budgets: dict[str, tuple[float, float]] = {}  # flow -> (nodes left, when)

    @contextlib.asynccontextmanager
    async def seat(self, user: User) -> AsyncIterator[None]:
        """Hold a seat of `user`'s level for the block; waits in `user`'s queue when none is free.

        Raises StatusError 429 (kube's TooManyRequests, Retry-After 1) when the queue is full or
        the wait times out."""
        level = self._levels.get(classify(user))
        if level is None:
            yield
            return
        flow = user.name
        if level.can_run(flow) and not level.queues.get(flow):
            level.take(flow)
        else:
            await self._wait(level, flow)
        try:
            yield
        finally:
            level.give_back(flow)

    async def _wait(self, level: _Level, flow: str) -> None:
        queue = level.queues.setdefault(flow, collections.deque())
        if len(queue) >= self.settings.queue_length:
            log.log(V(2), "Request refused: queue full", extra={"flow": flow, "priorityLevel": level.name})
            raise StatusError.too_many_requests(_TOO_MANY)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(waiter)
        try:
            async with asyncio.timeout(self.settings.queue_timeout):
                await asyncio.shield(waiter)
        except TimeoutError:
            if not waiter.done():
                waiter.cancel()
                log.log(V(2), "Request refused: waited too long", extra={"flow": flow, "priorityLevel": level.name})
                raise StatusError.too_many_requests(_TOO_MANY) from None
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                level.give_back(flow)  # it was handed a seat as its client went away
            else:
                waiter.cancel()
            raise

    async def before_body(self, user: User) -> None:
        """Wait (before a body is read) while `user`'s budget is overdrawn; StatusError 429 when
        that would be longer than `queue_timeout`. A waiting client's upload stalls in TCP, so
        what it sends costs the server nothing meanwhile."""
        if classify(user) not in _BUDGETED:
            return
        wait = self.overdrawn(user.name, asyncio.get_running_loop().time())
        if wait > self.settings.queue_timeout:
            log.log(V(2), "Request refused: body budget spent", extra={"flow": user.name})
            raise StatusError.too_many_requests(_TOO_MANY)
        if wait:
            log.log(V(4), "Body waits for its budget", extra={"flow": user.name, "seconds": round(wait, 3)})
            await asyncio.sleep(wait)

    def after_body(self, user: User, body: bytes) -> None:
        """Charge `body`'s nodes to `user`'s budget (it may go overdrawn: the next body waits)."""
        if classify(user) in _BUDGETED:
            self.charge(user.name, estimated_nodes(body), asyncio.get_running_loop().time())

    def overdrawn(self, flow: str, now: float) -> float:
        """Seconds until `flow`'s budget is no longer overdrawn (0: it is not)."""
        left = self._left(flow, now)
        return -left / self.settings.body_nodes_per_second if left < 0 else 0.0

    def charge(self, flow: str, nodes: int, now: float) -> None:
        self._budgets[flow] = (self._left(flow, now) - nodes, now)
        if len(self._budgets) > _MAX_BUDGETS:
            self._forget_full(now)

    def _left(self, flow: str, now: float) -> float:
        s = self.settings
        left, then = self._budgets.get(flow, (s.body_nodes_burst, now))
        return min(s.body_nodes_burst, left + (now - then) * s.body_nodes_per_second)

    def _forget_full(self, now: float) -> None:
        """Drop the budgets that have refilled (they are the default again)."""
        s = self.settings
        self._budgets = {
            flow: (left, then)
            for flow, (left, then) in self._budgets.items()
            if left + (now - then) * s.body_nodes_per_second < s.body_nodes_burst
        }

    @contextlib.contextmanager
    def watch(self, user: User) -> Iterator[None]:
        """Count an open watch of `user` for the block; 429 beyond `max_watches_per_user`."""
        if MASTERS in user.groups:
            yield
            return
        if self._watches[user.name] >= self.settings.max_watches_per_user:
            raise StatusError.too_many_requests(
                f"too many watches: {self._watches[user.name]} are open for this user "
                f"(at most {self.settings.max_watches_per_user})"
            )
        self._watches[user.name] += 1
        try:
            yield
        finally:
            self._watches[user.name] -= 1
            if not self._watches[user.name]:
                del self._watches[user.name]

    def stats(self) -> dict[str, dict[str, int]]:
        """Seats in use and requests waiting, per level (for logs and tests)."""
        return {
            name: {"busy": level.busy, "waiting": sum(len(q) for q in level.queues.values())}
            for name, level in self._levels.items()
        }
