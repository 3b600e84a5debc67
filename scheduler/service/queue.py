"""The scheduling queue: which pending pod is scheduled next, and when a failed one is retried.

kube-scheduler's PriorityQueue, in three parts:

- **active**: ready now, popped by priority (`spec.priority`, highest first), then first in,
  first out (the time the pod last entered the queue) — except that the members of one gang
  group (`group_of`) all take the time the group's first member arrived, so they are popped one
  after another and two gangs never interleave.
- **backoff**: failed recently; waits `initial_backoff × 2^(attempts−1)` (capped at
  `max_backoff`) before it is active again.
- **unschedulable**: no node fits; it stays here until a cluster event that may change that
  (a node or Device added or changed, an assigned pod deleted) concerns one of the plugins that
  rejected it, and at most `max_unschedulable` seconds. A pod whose own request is wrong (an
  invalid device request: UnschedulableAndUnresolvable at PreFilter) waits for a change to
  itself instead: no cluster event can help it.

A pod popped for scheduling is *in flight* (`scheduling`, then `waiting` at Permit or `binding`)
until the cycle ends with `done` (bound, or gone) or `requeue` (failed). If a cluster event
arrives while a pod is in flight, a failure of that pod goes to backoff rather than
unschedulable, so the event that might have made it fit is not missed (kube's "move request
cycle").

Thread-safe (one lock); `pop` blocks until a pod is ready. Time comes from an injected clock, so
tests drive backoff without sleeping (`pop(timeout=0)` never blocks).
"""

from __future__ import annotations

import enum
import heapq
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from apis.k8s.core import Pod
from scheduler.framework.events import ClusterEvent
from scheduler.framework.feeds import Concerns

__all__ = ["Interest", "PendingPod", "QueueName", "QueuedPod", "SchedulingQueue"]

#: Whether a pod rejected by these plugins may fit after this event. An empty set (the pod
#: failed for another reason) is always interested.
Interest = Callable[[frozenset[str], ClusterEvent], bool]

#: How often pods that stayed unschedulable too long are looked for (kube: every 30 s).
_FLUSH_PERIOD = 30.0


class QueueName(enum.Enum):
    ACTIVE = "active"
    BACKOFF = "backoff"
    UNSCHEDULABLE = "unschedulable"
    #: In flight: being scheduled, held at Permit, being bound.
    SCHEDULING = "scheduling"
    WAITING = "waiting"
    BINDING = "binding"


_IN_FLIGHT = frozenset({QueueName.SCHEDULING, QueueName.WAITING, QueueName.BINDING})


@dataclass(slots=True)
class QueuedPod:
    """One pending pod's bookkeeping. Owned by the queue: read it, change it only through the queue."""

    pod: Pod
    #: When the scheduler first saw the pod pending (the start of its end-to-end latency).
    first_seen: float
    #: When it last entered the queue: the FIFO order among equal priorities.
    timestamp: float
    where: QueueName = QueueName.ACTIVE
    attempts: int = 0
    #: The queue's cycle number when it was last popped (see "move request cycle").
    cycle: int = 0
    backoff_until: float = 0.0
    unschedulable_since: float = 0.0
    #: Plugins that rejected it in its last attempt, and what the attempt said.
    plugins: frozenset[str] = frozenset()
    message: str = ""
    #: Only a change to the pod itself can make it fit (cluster events do not move it).
    until_pod_changes: bool = False
    #: Its gang group when it was queued ("" for none): the queue counts a group's members.
    group: str = ""
    #: Tie-breaker and heap-entry identity (a re-push makes older heap entries stale).
    seq: int = 0

    @property
    def uid(self) -> str:
        return self.pod.uid or self.pod.key


@dataclass(frozen=True, slots=True)
class PendingPod:
    """A snapshot of one pending pod for diagnostics (ListPending, Explain)."""

    key: str
    uid: str
    profile: str
    queue: QueueName
    attempts: int
    priority: int
    message: str
    plugins: frozenset[str]
    waiting_seconds: float
    backoff_seconds: float


class SchedulingQueue:
    def __init__(
        self,
        *,
        interest: Interest,
        clock: Callable[[], float] = time.monotonic,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable: float = 300.0,
        group_of: Callable[[Pod], str | None] = lambda pod: None,
        moved: Callable[[str, int], None] = lambda _event, _count: None,
    ) -> None:
        """`moved(label, count)` is told how many unschedulable pods each event moved."""
        self._interest = interest
        self._moved = moved
        self._group_of = group_of
        #: gang group -> when its first member entered the queue (the group's place in line)
        self._group_since: dict[str, float] = {}
        #: Queued members per group: a group's entry above goes when its last member leaves.
        self._group_members: dict[str, int] = {}
        self._clock = clock
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._max_unschedulable = max_unschedulable
        self._cond = threading.Condition(threading.Lock())
        self._pods: dict[str, QueuedPod] = {}
        self._active: list[tuple[int, float, str, int, str]] = []  # (-priority, timestamp, group, seq, uid)
        self._backoff: list[tuple[float, int, str]] = []  # (backoff_until, seq, uid)
        self._seq = 0
        self._cycle = 0
        self._move_request_cycle = -1
        self._next_flush = clock() + _FLUSH_PERIOD
        self._closed = False

    # --- feeding (informer handlers) ----------------------------------------------------------------
    def add(self, pod: Pod) -> None:
        """A pending pod appeared (or changed): queue it, or update what is queued."""
        uid = pod.uid or pod.key
        with self._cond:
            entry = self._pods.get(uid)
            if entry is not None:
                self._update(entry, pod)
                return
            now = self._clock()
            entry = self._pods[uid] = QueuedPod(pod, first_seen=now, timestamp=now, group=self._group_of(pod) or "")
            if entry.group:
                self._group_members[entry.group] = self._group_members.get(entry.group, 0) + 1
            self._push_active(entry)

    def _update(self, entry: QueuedPod, pod: Pod) -> None:
        old, entry.pod = entry.pod, pod
        if entry.where is QueueName.UNSCHEDULABLE and _scheduling_relevant(old) != _scheduling_relevant(pod):
            # Its spec or annotations changed: the reason it did not fit may be gone.
            self._reactivate(entry, self._clock())
        elif entry.where is QueueName.ACTIVE and old.priority != pod.priority:
            self._push_active(entry)

    def delete(self, uid: str) -> None:
        """The pod is gone, or bound by someone else. Idempotent; a stale heap entry is skipped later."""
        with self._cond:
            self._forget(uid)

    def move(self, event: ClusterEvent, *, concerns: Concerns = None) -> int:
        """A cluster event: unschedulable pods it may help go back to backoff or active — those
        a plugin that rejected them registered the event for, and those it `concerns` whatever
        rejected them (a placed Reservation's owners). A pod whose own request is wrong waits for
        a change to itself either way.

        Returns how many moved (also told to `moved`, by the event's label).
        """
        with self._cond:
            self._move_request_cycle = self._cycle
            now = self._clock()
            moved = 0
            for entry in list(self._pods.values()):
                if (
                    entry.where is QueueName.UNSCHEDULABLE
                    and not entry.until_pod_changes
                    and (
                        not entry.plugins
                        or self._interest(entry.plugins, event)
                        or (concerns is not None and concerns(entry.pod))
                    )
                ):
                    self._reactivate(entry, now)
                    moved += 1
        if moved:
            self._moved(event.label, moved)
        return moved

    # --- the scheduling loop ------------------------------------------------------------------------
    def pop(self, timeout: float | None = None) -> QueuedPod | None:
        """The next pod to schedule (now in flight), waiting up to `timeout` seconds (None: forever).

        Returns None on timeout or after `close()`.
        """
        with self._cond:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                now = self._clock()
                self._flush(now)
                entry = self._pop_active()
                if entry is not None:
                    self._cycle += 1
                    entry.cycle = self._cycle
                    entry.attempts += 1
                    entry.where = QueueName.SCHEDULING
                    return entry
                if self._closed:
                    return None
                wait = self._next_wake(now)
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._cond.wait(wait)

    def mark(self, uid: str, where: QueueName) -> None:
        """An in-flight pod moved on (held at Permit, being bound)."""
        with self._cond:
            entry = self._pods.get(uid)
            if entry is not None and entry.where in _IN_FLIGHT:
                entry.where = where

    def requeue(
        self,
        uid: str,
        *,
        unschedulable: bool,
        plugins: Iterable[str] = (),
        message: str = "",
        until_pod_changes: bool = False,
    ) -> None:
        """An in-flight pod failed. `unschedulable`: no node fits (it waits for a cluster event);
        otherwise (an error, a failed binding) it backs off. `until_pod_changes`: only a change to
        the pod can help (it waits for an update of itself, or the periodic flush). A pod deleted
        meanwhile is dropped."""
        with self._cond:
            entry = self._pods.get(uid)
            if entry is None or entry.where not in _IN_FLIGHT:
                return
            now = self._clock()
            entry.plugins = frozenset(plugins)
            entry.message = message
            entry.until_pod_changes = until_pod_changes
            entry.timestamp = now
            entry.backoff_until = now + self.backoff_for(entry.attempts)
            if until_pod_changes or (unschedulable and self._move_request_cycle < entry.cycle):
                entry.where = QueueName.UNSCHEDULABLE
                entry.unschedulable_since = now
            else:
                self._push_backoff(entry)
            self._cond.notify_all()

    def activate(self, uids: Iterable[str], *, after_backoff: bool = False) -> int:
        """Pods a plugin wants retried now (a gang's siblings): out of unschedulable or backoff,
        into active — or, with `after_backoff`, into active once their backoff is over (a pod
        still backing off stays in backoff). Returns how many moved."""
        moved = 0
        with self._cond:
            now = self._clock()
            for uid in uids:
                entry = self._pods.get(uid)
                if entry is None or entry.where not in (QueueName.UNSCHEDULABLE, QueueName.BACKOFF):
                    continue
                if after_backoff and entry.backoff_until > now:
                    if entry.where is QueueName.UNSCHEDULABLE:
                        self._push_backoff(entry)
                        self._cond.notify_all()
                else:
                    self._push_active(entry)
                moved += 1
        return moved

    def done(self, uid: str) -> QueuedPod | None:
        """The pod is bound (or will never be scheduled here): forget it. Returns its last entry."""
        with self._cond:
            return self._forget(uid)

    def _forget(self, uid: str) -> QueuedPod | None:
        """Drop the pod; with its group's last member, the group's place in the order too."""
        entry = self._pods.pop(uid, None)
        if entry is not None and entry.group:
            left = self._group_members.get(entry.group, 1) - 1
            if left > 0:
                self._group_members[entry.group] = left
            else:
                self._group_members.pop(entry.group, None)
                self._group_since.pop(entry.group, None)
        return entry

    def close(self) -> None:
        """Wake every `pop` with None."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # --- reading ------------------------------------------------------------------------------------
    def get(self, uid: str) -> PendingPod | None:
        with self._cond:
            entry = self._pods.get(uid)
            return self._snapshot(entry, self._clock()) if entry is not None else None

    def pending(self) -> list[PendingPod]:
        """Every queued or in-flight pod, by queue, then priority and age."""
        with self._cond:
            now = self._clock()
            out = [self._snapshot(e, now) for e in self._pods.values()]
        order = {name: i for i, name in enumerate(QueueName)}
        return sorted(out, key=lambda p: (order[p.queue], -p.priority, -p.waiting_seconds, p.key))

    def lengths(self) -> dict[QueueName, int]:
        """How many pods are in each queue (in-flight states included)."""
        counts = dict.fromkeys(QueueName, 0)
        with self._cond:
            for entry in self._pods.values():
                counts[entry.where] += 1
        return counts

    def backoff_for(self, attempts: int) -> float:
        """initial × 2^(attempts−1), capped."""
        delay = self._initial_backoff
        for _ in range(1, attempts):
            delay *= 2
            if delay >= self._max_backoff:
                return self._max_backoff
        return min(delay, self._max_backoff)

    # --- internals (lock held) ------------------------------------------------------------------------
    def _snapshot(self, entry: QueuedPod, now: float) -> PendingPod:
        backoff = entry.backoff_until - now if entry.where is QueueName.BACKOFF else 0.0
        return PendingPod(
            key=entry.pod.key,
            uid=entry.uid,
            profile=entry.pod.scheduler_name,
            queue=entry.where,
            attempts=entry.attempts,
            priority=entry.pod.priority,
            message=entry.message,
            plugins=entry.plugins,
            waiting_seconds=max(0.0, now - entry.first_seen),
            backoff_seconds=max(0.0, backoff),
        )

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _push_active(self, entry: QueuedPod) -> None:
        entry.where = QueueName.ACTIVE
        entry.seq = self._next_seq()
        group = self._group_of(entry.pod) or ""
        since = self._group_since.setdefault(group, entry.timestamp) if group else entry.timestamp
        heapq.heappush(self._active, (-entry.pod.priority, since, group, entry.seq, entry.uid))
        self._cond.notify_all()

    def _push_backoff(self, entry: QueuedPod) -> None:
        entry.where = QueueName.BACKOFF
        entry.seq = self._next_seq()
        heapq.heappush(self._backoff, (entry.backoff_until, entry.seq, entry.uid))

    def _reactivate(self, entry: QueuedPod, now: float) -> None:
        """Out of unschedulable: to backoff while its backoff lasts, else active."""
        if entry.backoff_until > now:
            self._push_backoff(entry)
            self._cond.notify_all()
        else:
            self._push_active(entry)

    def _pop_active(self) -> QueuedPod | None:
        while self._active:
            _, _, _, seq, uid = heapq.heappop(self._active)
            entry = self._pods.get(uid)
            if entry is not None and entry.where is QueueName.ACTIVE and entry.seq == seq:
                return entry
        return None

    def _flush(self, now: float) -> None:
        while self._backoff and self._backoff[0][0] <= now:
            _, seq, uid = heapq.heappop(self._backoff)
            entry = self._pods.get(uid)
            if entry is not None and entry.where is QueueName.BACKOFF and entry.seq == seq:
                self._push_active(entry)
        if now >= self._next_flush:
            self._next_flush = now + _FLUSH_PERIOD
            limit = now - self._max_unschedulable
            for entry in list(self._pods.values()):
                if entry.where is QueueName.UNSCHEDULABLE and entry.unschedulable_since <= limit:
                    self._reactivate(entry, now)

    def _next_wake(self, now: float) -> float | None:
        """Seconds until something may become active (a backoff ends, the unschedulable flush)."""
        wake = self._next_flush - now
        while self._backoff:
            until, seq, uid = self._backoff[0]
            entry = self._pods.get(uid)
            if entry is not None and entry.where is QueueName.BACKOFF and entry.seq == seq:
                wake = min(wake, until - now)
                break
            heapq.heappop(self._backoff)  # stale
        return max(wake, 0.0)


def _scheduling_relevant(pod: Pod) -> tuple[object, ...]:
    """What of a pod can change whether it fits (kube ignores status and metadata bookkeeping)."""
    return (
        pod.containers,
        pod.init_containers,
        pod.overhead,
        pod.node_selector,
        pod.node_affinity,
        pod.tolerations,
        pod.labels,
        pod.annotations,
        pod.priority,
        pod.resource_claims,
        pod.resource_claim_statuses,
    )
