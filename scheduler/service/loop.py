"""The scheduling loop: one thread that takes the next pod from the queue and runs its cycle.

A cycle holds the cache lock from Filter to PreBind's plugins: schedule → assume → Reserve →
Permit → PreBind (computes the annotation) and hands the placement to the binder, which does
the API calls without the lock. A pod that fits nowhere goes back to the queue (unschedulable,
waiting for a cluster event; or backoff after an error) and its failure is reported through
the `FailureReporter`. Pods held at Permit (gang scheduling) are resolved at the top of every
iteration: bound when allowed, undone when rejected or timed out.

Only the leader runs the loop (`start()`/`stop()`); a follower's informers keep its cache and
queue just as warm, so it can take over at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kube.logs import V
from scheduler.cache import ClusterCache, PodInfo
from scheduler.framework import CycleState, Framework
from scheduler.framework.status import Code, Status
from scheduler.service.binder import Binder, Placement, annotations_for
from scheduler.service.metrics import SchedulerMetrics
from scheduler.service.queue import POD_DELETED, QueuedPod, QueueName, SchedulingQueue
from scheduler.service.reporter import REASON_SCHEDULER_ERROR, FailureReporter
from scheduler.service.scoretable import DebugFlags, score_table

__all__ = ["SchedulingLoop"]

log = logging.getLogger(__name__)

#: How often pods held at Permit are checked when nothing else wakes the loop.
_PERMIT_POLL = 0.2


@dataclass(slots=True)
class _Waiting:
    placement: Placement
    entry: QueuedPod


class SchedulingLoop:
    def __init__(
        self,
        *,
        lock: threading.RLock,
        cache: ClusterCache,
        frameworks: Mapping[str, Framework],
        queue: SchedulingQueue,
        binder: Binder,
        reporter: FailureReporter,
        metrics: SchedulerMetrics,
        debug: DebugFlags,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = lock
        self._cache = cache
        self._frameworks = frameworks
        self._queue = queue
        self._binder = binder
        self._reporter = reporter
        self._metrics = metrics
        self._debug = debug
        self._clock = clock
        self._observers = {name: metrics.observer(name) for name in frameworks}
        self._waiting: dict[str, _Waiting] = {}
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
        log.info("Scheduling started", extra={"profiles": ",".join(sorted(self._frameworks))})

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
                entry = self._queue.pop(timeout=_PERMIT_POLL if self._waiting else 1.0)
                if entry is not None and not self._stop.is_set():
                    self._cycle(entry)
        except Exception:
            self.crashed = True
            log.exception("The scheduling loop failed")
            raise

    def _cycle(self, entry: QueuedPod) -> None:
        """One cycle, as a loop boundary: a bug is logged with its stack, the pod backs off and
        the loop goes on (the framework already turns plugin exceptions into ERROR statuses)."""
        try:
            self.schedule_one(entry)
        except Exception as e:
            log.exception("Scheduling cycle failed", extra={"pod": entry.pod.key})
            self._queue.requeue(entry.uid, unschedulable=False, message=f"internal error: {type(e).__name__}: {e}")

    # --- one cycle ----------------------------------------------------------------------------------
    def schedule_one(self, entry: QueuedPod) -> None:
        """Run one pod's cycle: bind it, hold it at Permit, or requeue it and report why not."""
        pod = entry.pod
        framework = self._frameworks.get(pod.scheduler_name)
        if framework is None:  # its schedulerName changed? it is not ours any more
            self._queue.done(entry.uid)
            return
        start = time.perf_counter()
        info = PodInfo.of(pod)
        state = CycleState()
        top_n = self._debug.top_n_scores
        placement: Placement | None = None
        with self._lock:
            if self._cache.pod_node(info.ident) is not None:
                # Bound meanwhile (the informer was quicker than the queue), or still assumed.
                self._queue.done(entry.uid)
                return
            result = framework.schedule(state, info, record_scores=top_n > 0)
            if result.node is None:
                status = result.status
                plugins = result.diagnosis.unschedulable_plugins()
            else:
                status, placement = self._reserve(framework, state, info, result.node, entry)
                plugins = frozenset({status.plugin}) if status.plugin else frozenset()
        elapsed = time.perf_counter() - start
        if top_n > 0 and result.scores is not None:
            table = score_table(pod.key, result.scores, top_n)
            self._debug.keep(table)
            log.info("Score table", extra={"pod": pod.key, "node": result.node, "table": table})
        if placement is None or (not status.is_success and status.code is not Code.WAIT):
            self._failed(entry, status, plugins, elapsed, framework.profile)
            return
        if status.code is Code.WAIT:
            self._waiting[info.ident] = _Waiting(placement, entry)
            self._queue.mark(entry.uid, QueueName.WAITING)
            self._metrics.attempt(framework.profile, "waiting", elapsed)
            log.log(V(4), "Pod waits at Permit", extra={"pod": pod.key, "node": result.node})
            return
        self._metrics.attempt(framework.profile, "scheduled", elapsed)
        log.log(V(4), "Scheduled pod", extra={"pod": pod.key, "node": result.node})
        self._binder.submit(placement)

    def _reserve(
        self, framework: Framework, state: CycleState, info: PodInfo, node: str, entry: QueuedPod
    ) -> tuple[Status, Placement]:
        """Assume, Reserve, Permit and PreBind's plugins (cache lock held); undone on failure."""
        self._cache.assume(info, node)
        placement = Placement(
            pod=info,
            node=node,
            framework=framework,
            state=state,
            annotations={},
            attempts=entry.attempts,
            first_seen=entry.first_seen,
            observe=self._observers.get(framework.profile),
        )
        status = framework.run_reserve(state, info, node)
        if status.is_success:
            status = framework.run_permit(state, info, node, now=self._clock())
        if status.is_success:
            status = self._pre_bind(placement)
        if not status.is_success and status.code is not Code.WAIT:
            placement.undo(self._cache)
        return status, placement

    def _pre_bind(self, placement: Placement) -> Status:
        status, patch = placement.framework.run_pre_bind(placement.state, placement.pod, placement.node)
        placement.annotations = annotations_for(placement.pod.pod, patch.annotations)
        return status

    def _failed(self, entry: QueuedPod, status: Status, plugins: frozenset[str], elapsed: float, profile: str) -> None:
        pod = entry.pod
        error = status.code is Code.ERROR
        self._metrics.attempt(profile, "error" if error else "unschedulable", elapsed)
        message = status.message or "scheduling failed"
        what = "Scheduling failed" if error else "Pod is unschedulable"
        log.log(V(2), what, extra={"pod": pod.key, "reason": message})
        self._queue.requeue(entry.uid, unschedulable=not error, plugins=plugins, message=message)
        self._reporter.unschedulable(pod, message, reason=REASON_SCHEDULER_ERROR if error else "Unschedulable")

    # --- pods held at Permit ------------------------------------------------------------------------
    def _resolve_waiting(self) -> None:
        if not self._waiting:
            return
        now = self._clock()
        decided: list[tuple[_Waiting, Status]] = []
        with self._lock:
            for framework in self._frameworks.values():
                framework.expire_waiting(now=now)
            for ident, waiting in list(self._waiting.items()):
                placement = waiting.placement
                held = placement.framework.waiting_pod(ident)
                decision = held.decision if held is not None else Status.error("no longer waiting")
                if decision is None:
                    continue
                del self._waiting[ident]
                placement.framework.remove_waiting(ident)
                if decision.is_success:
                    decision = self._pre_bind(placement)
                if not decision.is_success:
                    placement.undo(self._cache)
                decided.append((waiting, decision))
        if any(not decision.is_success for _, decision in decided):
            self._queue.move(POD_DELETED)  # the room rejected pods held is free again
        for waiting, decision in decided:
            if decision.is_success:
                self._binder.submit(waiting.placement)
            else:
                plugins = frozenset({decision.plugin}) if decision.plugin else frozenset()
                self._failed(waiting.entry, decision, plugins, 0.0, waiting.placement.framework.profile)
