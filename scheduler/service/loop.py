"""The scheduling loop: one thread that takes the next pod from the queue and runs its cycle.

The cycle itself is `scheduler.core.SchedulingCycle`, run under the cache lock: schedule →
assume → Reserve → Permit → PreBind's plugins (which compute the annotation). Its way to bind is
the `Handoff`: the placement is handed over at once, and the loop passes it on to the binder
once it has left the lock and done its bookkeeping (attempt metrics, the debug score table), so
the API calls never run under the lock and no pod is seen bound before its attempt is counted.
A pod that fits nowhere goes back to the queue (unschedulable, waiting for a cluster event, or
for a change to itself when its own request is wrong; or backoff after an error) and its
failure is reported through the `FailureReporter`. Pods held at Permit (gang scheduling) wait
in the cycle; the loop resolves them at the top of every iteration, polling every
`_PERMIT_POLL` seconds while any wait: bound when allowed, undone and requeued when rejected or
timed out.

Only the leader runs the loop (`start()`/`stop()`); a follower's informers keep its cache and
queue just as warm, so it can take over at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kube.logs import V
from scheduler.cache import PodInfo
from scheduler.core import SchedulingCycle
from scheduler.framework.events import WAITING_POD_REJECTED
from scheduler.framework.preemption import Preemption
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.service.binder import Binder, LivePlacement
from scheduler.service.metrics import SchedulerMetrics
from scheduler.service.preemptor import Preemptor
from scheduler.service.queue import QueuedPod, QueueName, SchedulingQueue
from scheduler.service.reporter import REASON_SCHEDULER_ERROR, FailureReporter
from scheduler.service.scoretable import DebugFlags, score_table

__all__ = ["Handoff", "ReservationRoute", "SchedulingLoop"]

log = logging.getLogger(__name__)

#: How often pods held at Permit are checked when nothing else wakes the loop.
_PERMIT_POLL = 0.2


class Handoff:
    """How the live cycle binds (its `Bind`): a reserved placement is taken at once (SUCCESS) and
    kept until the loop, out of the cache lock, passes it on to the binder. Used by the loop
    thread only."""

    def __init__(self) -> None:
        self._placements: list[LivePlacement] = []

    def __call__(self, placement: LivePlacement) -> Status:
        self._placements.append(placement)
        return SUCCESS

    def take(self) -> list[LivePlacement]:
        """What was handed over since the last call."""
        placements, self._placements = self._placements, []
        return placements


@dataclass(frozen=True, slots=True)
class ReservationRoute:
    """Where a Reservation's placement and failures go (its reserve pod is queued as a pod):
    a `Binder` and a `FailureReporter` over `ReservationAPI`. A Reservation never preempts."""

    owns: Callable[[str], bool]
    binder: Binder
    reporter: FailureReporter


class SchedulingLoop:
    def __init__(
        self,
        *,
        lock: threading.RLock,
        cycle: SchedulingCycle[QueuedPod],
        handoff: Handoff,
        queue: SchedulingQueue,
        binder: Binder,
        preemptor: Preemptor,
        reporter: FailureReporter,
        metrics: SchedulerMetrics,
        debug: DebugFlags,
        reservations: ReservationRoute | None = None,
    ) -> None:
        """`handoff` must be `cycle`'s bind: what the cycle hands over goes to `binder` (a
        Reservation's to `reservations.binder`)."""
        self._reservations = reservations
        self._lock = lock
        self._cycle = cycle
        self._handoff = handoff
        self._queue = queue
        self._binder = binder
        self._preemptor = preemptor
        self._reporter = reporter
        self._metrics = metrics
        self._debug = debug
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Set when the loop thread died of a bug (healthz reports it).
        self.crashed = False

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the loop thread; does nothing once stopped (a replica that stopped scheduling
        exits rather than schedules again: see `leader`)."""
        if self._thread is not None or self._stop.is_set():
            return
        self._thread = threading.Thread(target=self._run, name="scheduling-loop", daemon=True)
        self._thread.start()
        log.info("Scheduling started", extra={"profiles": ",".join(sorted(self._cycle.frameworks))})

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the current cycle and stop for good. Idempotent."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._resolve_waiting()
                entry = self._queue.pop(timeout=_PERMIT_POLL if self._cycle.waiting else 1.0)
                if entry is not None and not self._stop.is_set():
                    self._run_cycle(entry)
        except Exception:
            self.crashed = True
            log.exception("The scheduling loop failed")
            raise

    def _run_cycle(self, entry: QueuedPod) -> None:
        """One cycle, as a loop boundary: a bug is logged with its stack, the pod backs off and
        the loop goes on (the framework already turns plugin exceptions into ERROR statuses)."""
        try:
            self.schedule_one(entry)
        except Exception as e:
            log.exception("Scheduling cycle failed", extra={"pod": entry.pod.key})
            self._queue.requeue(entry.uid, unschedulable=False, message=f"internal error: {type(e).__name__}: {e}")

    # --- one cycle ----------------------------------------------------------------------------------
    def schedule_one(self, entry: QueuedPod) -> None:
        """Run one pod's cycle: bind it, hold it at Permit, or requeue it and report why not;
        then retry at once the pods the plugins asked for (a gang's siblings)."""
        activate = self._schedule_one(entry)
        if activate:
            self._retry(activate)

    def _retry(self, uids: set[str] | frozenset[str]) -> None:
        """Retry the pods the plugins asked for as soon as their backoff allows. Not at once, as
        kube's Activate would: a gang that can never fit starts a new cycle each time its
        members have all been tried, and activating them past their backoff would spin the loop
        (thousands of attempts a second); with backoff the gang is retried every few seconds."""
        if uids:
            self._queue.activate(uids, after_backoff=True)

    def _schedule_one(self, entry: QueuedPod) -> frozenset[str]:
        pod = entry.pod
        framework = self._cycle.frameworks.get(pod.scheduler_name)
        if framework is None:  # its schedulerName changed? it is not ours any more
            self._queue.done(entry.uid)
            return frozenset()
        start = time.perf_counter()
        top_n = self._debug.top_n_scores
        with self._lock:
            attempt = self._cycle.schedule_one(pod, framework, entry, record_scores=top_n > 0)
        if attempt is None:
            # Bound meanwhile (the informer was quicker than the queue), or still assumed.
            self._queue.done(entry.uid)
            return frozenset()
        elapsed = time.perf_counter() - start
        if top_n > 0 and attempt.scores is not None:
            table = score_table(pod.key, attempt.scores, top_n)
            self._debug.keep(table)
            log.info("Score table", extra={"pod": pod.key, "node": attempt.node, "table": table})
        status = attempt.status
        if status.code is Code.WAIT:
            self._queue.mark(entry.uid, QueueName.WAITING)
            self._metrics.attempt(framework.profile, "waiting", elapsed)
            log.log(V(4), "Pod waits at Permit", extra={"pod": pod.key, "node": attempt.node})
            return attempt.activate
        if not status.is_success:
            plugins = frozenset() if attempt.pod_must_change else attempt.rejected_by
            self._failed(entry, status, plugins, elapsed, framework.profile, until_pod_changes=attempt.pod_must_change)
            if attempt.preemption is not None and not self._is_reservation(entry.uid):
                self._preempt(attempt.pod, attempt.preemption)
            return attempt.activate
        self._metrics.attempt(framework.profile, "scheduled", elapsed)
        log.log(V(4), "Scheduled pod", extra={"pod": pod.key, "node": attempt.node})
        self._pass_on()
        return attempt.activate

    def _preempt(self, pod: PodInfo, preemption: Preemption) -> None:
        """Nominate the pod at once (its room is kept from now on), evict in the background."""
        with self._lock:
            self._cycle.cache.nominator.nominate(pod, preemption.node, preemption.victims)
        self._metrics.preemption()
        self._preemptor.submit(pod.pod, preemption)

    def _pass_on(self) -> None:
        """Give the binder what the cycle handed over (outside the cache lock)."""
        for placement in self._handoff.take():
            route = self._reservations if self._is_reservation(placement.uid) else None
            (route.binder if route is not None else self._binder).submit(placement)

    def _is_reservation(self, uid: str) -> bool:
        return self._reservations is not None and self._reservations.owns(uid)

    def _failed(
        self,
        entry: QueuedPod,
        status: Status,
        plugins: frozenset[str],
        elapsed: float,
        profile: str,
        *,
        until_pod_changes: bool = False,
    ) -> None:
        pod = entry.pod
        error = status.code is Code.ERROR
        self._metrics.attempt(profile, "error" if error else "unschedulable", elapsed)
        message = status.message or "scheduling failed"
        what = "Scheduling failed" if error else "Pod is unschedulable"
        log.log(V(2), what, extra={"pod": pod.key, "reason": message})
        self._queue.requeue(
            entry.uid, unschedulable=not error, plugins=plugins, message=message, until_pod_changes=until_pod_changes
        )
        reporter = self._reservations.reporter if self._reservations and self._is_reservation(entry.uid) else None
        (reporter or self._reporter).unschedulable(
            pod, message, reason=REASON_SCHEDULER_ERROR if error else "Unschedulable"
        )

    # --- pods held at Permit ------------------------------------------------------------------------
    def _resolve_waiting(self) -> None:
        if not self._cycle.waiting:
            return
        with self._lock:
            decided = self._cycle.resolve_waiting()
        failed = [attempt for attempt in decided if not attempt.status.is_success]
        if failed:
            self._queue.move(WAITING_POD_REJECTED)  # the room rejected pods held is free again
        self._pass_on()
        for attempt in failed:
            self._failed(attempt.ticket, attempt.status, attempt.rejected_by, 0.0, attempt.framework.profile)
        self._retry({uid for attempt in decided for uid in attempt.activate})
