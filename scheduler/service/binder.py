"""Asynchronous binding: PreBind, its writes and the Binding, off the scheduling thread.

The scheduling cycle (`scheduler.core.cycle`) decides and reserves in the cache; the loop hands
the resulting `Placement` to the `Binder`, whose worker threads run the binding cycle: PreBind's
plugins (`scheduler.core.pre_bind`, without the cache lock: they read the cycle state only), the
writes they ask for (`scheduler.framework.writes`: other objects through `ObjectAPI`; the pod's
annotations travel in the Binding, which sets them with the node in one write), the Bind
plugins and the Binding — so a slow API server delays
bindings, never the next cycle. Each binding ends in exactly one of:

- **bound**: the assumed pod stays in the cache (the informer's update confirms it) and leaves
  the queue; a Normal `Scheduled` Event says where, as kube-scheduler's does;
- **undone**: the object writes made for it are taken back (each `ObjectWrite.undo`, newest
  first), then the cycle's `undo` releases what Reserve took and forgets the assumption, and the
  pod goes back to the queue with backoff (or is dropped when it was deleted);
- **adopted**: the API server says the pod is bound somewhere else (someone else bound it): the
  cache takes the API's version instead of ours.

Before binding, every annotation the cache reads as a record of what a pod holds (its holdings
sources' annotations, `ClusterCache.holdings`) is made exactly what this binding's PreBind asked
for (set, or removed when the pod carries one it did not ask for), so a bound pod's records
always match what the cache reserved for it. When the Binding's outcome is unknown (the
connection broke, a 5xx, a 409) the binder asks the API server what happened and acts on the
answer; until it knows, the pod stays assumed — its devices held — because releasing them for a
pod that is in fact bound could hand a GPU to two pods. Assumed pods never expire by time here
either.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from apis.errors import TesseraError
from apis.k8s.core import Pod
from kube import Backoff, EventRecorder, ObjectReference, errors
from kube.logs import V
from scheduler.cache import Holdings
from scheduler.core import Placement, SchedulingCycle, pre_bind
from scheduler.framework.events import BINDING_UNDONE
from scheduler.framework.interfaces import ExtensionPoint
from scheduler.framework.runtime import PointObserver
from scheduler.framework.status import Code
from scheduler.framework.writes import Writes
from scheduler.service.metrics import SchedulerMetrics
from scheduler.service.objectapi import ObjectAPI
from scheduler.service.podapi import PodAPI
from scheduler.service.queue import QueuedPod, QueueName, SchedulingQueue
from scheduler.service.reporter import REASON_SCHEDULER_ERROR, FailureReporter

__all__ = ["REASON_SCHEDULED", "Binder", "LivePlacement", "annotations_for"]

log = logging.getLogger(__name__)

_VERIFY_BACKOFF = Backoff(initial=0.2, maximum=10.0)
#: kube-scheduler's Event for a pod it bound.
REASON_SCHEDULED = "Scheduled"

#: A placement of the live cycle: its ticket is the pod's queue entry (attempts, first seen).
LivePlacement = Placement[QueuedPod]


def annotations_for(pod: Pod, writes: Writes, holdings: Holdings) -> dict[str, str | None]:
    """PreBind's annotations, plus the removal of every record of holdings (`holdings`'
    annotations) the pod carries but this binding did not ask for (a stale one, or one someone
    else wrote)."""
    out: dict[str, str | None] = dict(writes.annotations)
    for key in holdings.carried(pod):
        out.setdefault(key, None)
    return out


class Binder:
    def __init__(
        self,
        api: PodAPI,
        *,
        lock: threading.RLock,
        cycle: SchedulingCycle[QueuedPod],
        queue: SchedulingQueue,
        reporter: FailureReporter,
        recorder: EventRecorder,
        metrics: SchedulerMetrics,
        objects: ObjectAPI,
        workers: int = 16,
        clock: Callable[[], float] = time.monotonic,
        refer: Callable[[Pod], ObjectReference] = ObjectReference.of,
    ) -> None:
        """`api` writes the pod (a Reservation's binder: the Reservation), `objects` the other
        objects PreBind asks for; `refer` names the object Events are about."""
        self._api = api
        self._objects = objects
        self._refer = refer
        self._recorder = recorder
        self._lock = lock
        self._cycle = cycle
        self._cache = cycle.cache
        self._queue = queue
        self._reporter = reporter
        self._metrics = metrics
        self._clock = clock
        self._observers: dict[str, PointObserver] = {name: metrics.observer(name) for name in cycle.frameworks}
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scheduler-binder")
        self._stop = threading.Event()
        self._idle = threading.Condition()
        self._in_flight = 0

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def submit(self, placement: LivePlacement) -> None:
        """Bind in the background. The pod must be assumed and reserved in the cache."""
        with self._idle:
            self._in_flight += 1
        self._queue.mark(placement.uid, QueueName.BINDING)
        self._executor.submit(self._run, placement)

    def wait_idle(self, timeout: float) -> bool:
        """True once no binding is in flight."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def stop(self, timeout: float = 30.0) -> None:
        """Let started bindings finish (up to `timeout`), drop those not started. Idempotent.

        A dropped binding leaves its pod assumed; that is only safe because the process exits
        next (a restart rebuilds everything from the API).
        """
        self.wait_idle(timeout)
        self._stop.set()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # --- one binding --------------------------------------------------------------------------------
    def _run(self, placement: LivePlacement) -> None:
        try:
            self._bind(placement)
        except Exception:
            # A bug on our side: we cannot tell whether the Binding went through, so ask.
            log.exception("Binding failed unexpectedly", extra={"pod": placement.pod.key, "node": placement.node})
            self._resolve(placement, "unexpected error")
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()

    def _bind(self, placement: LivePlacement) -> None:
        pod = placement.pod.pod
        start = time.perf_counter()
        status = pre_bind(placement)  # no lock: PreBind reads the cycle state only
        if not status.is_success:
            self._observe(placement, ExtensionPoint.PRE_BIND, status.code, start)
            self._fail(placement, f"plugin {status.plugin}", f"Binding rejected: {status.message}")
            return
        changes = annotations_for(pod, placement.writes, self._cache.holdings)
        # The Binding sets annotations but cannot remove them; a Bind plugin binds its own way.
        # Either needs a patch first — the common case leaves everything to the Binding.
        if placement.framework.plugin_names(ExtensionPoint.BIND):
            first, carried = changes, {}
        else:
            first = {key: value for key, value in changes.items() if value is None}
            carried = {key: value for key, value in changes.items() if value is not None}
        if first and not self._annotate(placement, first, start):
            return
        for write in placement.writes.objects:
            try:
                self._objects.write(write)
            except errors.APIError as e:
                self._observe(placement, ExtensionPoint.PRE_BIND, Code.ERROR, start)
                self._fail(placement, _reason(e), f"Binding rejected: cannot write {write.describe()}: {e}")
                return
            placement.written.append(write)
        start = self._observe(placement, ExtensionPoint.PRE_BIND, Code.SUCCESS, start)
        with self._lock:
            status = placement.framework.run_bind(placement.state, placement.pod, placement.node)
        if status.code is not Code.SKIP:
            self._observe(placement, ExtensionPoint.BIND, status.code, start)
            if status.is_success:
                self._bound(placement, None)
            else:
                self._fail(placement, f"plugin {status.plugin}", f"Binding rejected: {status.message}")
            return
        try:
            self._api.bind(pod, placement.node, carried)
        except errors.NotFound:
            self._gone(placement)
            return
        except (errors.Conflict, errors.ServerError, errors.TooManyRequests) as e:
            # 409: bound already (by whom?) or replaced; 5xx / no answer: maybe bound. Ask.
            self._observe(placement, ExtensionPoint.BIND, Code.ERROR, start)
            self._resolve(placement, _reason(e))
            return
        except errors.APIError as e:
            self._observe(placement, ExtensionPoint.BIND, Code.ERROR, start)
            self._fail(placement, _reason(e), f"Binding rejected: {e}")
            return
        self._observe(placement, ExtensionPoint.BIND, Code.SUCCESS, start)
        self._bound(placement, None)

    def _annotate(self, placement: LivePlacement, changes: dict[str, str | None], start: float) -> bool:
        """Patch the pod's annotations before the Binding; False (the binding is over) when that fails."""
        try:
            self._api.annotate(placement.pod.pod, changes)
        except (errors.NotFound, errors.Conflict):
            self._gone(placement)  # deleted, or deleted and re-created (the UID no longer matches)
            return False
        except errors.APIError as e:
            # Not bound (we never posted the Binding); an annotation that did get written is
            # overwritten or removed by the next attempt before that one binds.
            self._observe(placement, ExtensionPoint.PRE_BIND, Code.ERROR, start)
            self._fail(placement, _reason(e), f"Binding rejected: {e}")
            return False
        return True

    def _resolve(self, placement: LivePlacement, reason: str) -> None:
        """The Binding's outcome is unknown: read the pod until the API server answers."""
        key = placement.pod.key
        delays = _VERIFY_BACKOFF.delays()
        namespace, name = placement.pod.pod.namespace, placement.pod.pod.name
        while True:
            try:
                current = self._api.get(namespace, name)
                break
            except TesseraError as e:
                if not isinstance(e, errors.APIError):  # the pod no longer parses: asking again will not help
                    log.error(
                        "Cannot tell whether the pod was bound; it stays assumed", extra={"pod": key, "error": str(e)}
                    )
                    return
                if self._stop.is_set():
                    log.warning("Binding outcome unknown at shutdown; the pod stays assumed", extra={"pod": key})
                    return
                delay = next(delays)
                log.warning(
                    "Cannot read the pod to learn whether it was bound; retrying",
                    extra={"pod": key, "error": str(e), "retryIn": f"{delay:.2f}s"},
                )
                self._stop.wait(delay)
        if current is None or current.uid != placement.uid:
            self._gone(placement)
        elif not current.node_name:
            self._fail(placement, reason, f"Binding failed ({reason}); will retry")
        elif current.node_name == placement.node and _same_allocation(current, placement, self._cache.holdings):
            log.log(V(2), "The Binding went through after all", extra={"pod": key, "node": placement.node})
            self._bound(placement, current)
        else:
            self._adopt(placement, current)

    # --- outcomes -----------------------------------------------------------------------------------
    def _bound(self, placement: LivePlacement, current: Pod | None) -> None:
        with self._lock:
            self._cache.finish_binding(placement.uid, now=self._clock())
            if current is not None:
                self._cache.add_pod(current)  # what the API has; the informer's copy will agree
            placement.framework.run_post_bind(placement.state, placement.pod, placement.node)
        self._queue.done(placement.uid)
        self._reporter.forget(placement.uid)
        entry = placement.ticket
        self._metrics.bound(attempts=entry.attempts, e2e_seconds=self._clock() - entry.first_seen)
        self._recorder.normal(
            self._refer(placement.pod.pod),
            REASON_SCHEDULED,
            f"Successfully assigned {placement.pod.key} to {placement.node}",
        )
        log.log(V(2), "Bound pod", extra={"pod": placement.pod.key, "node": placement.node})

    def _fail(self, placement: LivePlacement, reason: str, message: str) -> None:
        self._release(placement)
        self._metrics.bind_failed(reason)
        log.warning(
            "Binding failed; pod requeued", extra={"pod": placement.pod.key, "node": placement.node, "error": message}
        )
        self._queue.requeue(placement.uid, unschedulable=False, message=message)
        self._reporter.unschedulable(placement.pod.pod, message, reason=REASON_SCHEDULER_ERROR)

    def _gone(self, placement: LivePlacement) -> None:
        self._release(placement)
        self._metrics.bind_failed("NotFound")
        self._queue.delete(placement.uid)
        self._reporter.forget(placement.uid)
        log.log(V(2), "Pod deleted before it was bound", extra={"pod": placement.pod.key})

    def _adopt(self, placement: LivePlacement, current: Pod) -> None:
        self._release(placement, current)
        self._metrics.bind_failed("BoundElsewhere")
        self._queue.done(placement.uid)
        self._reporter.forget(placement.uid)
        log.warning(
            "Pod was bound by someone else; keeping the API's placement",
            extra={"pod": placement.pod.key, "node": current.node_name, "ours": placement.node},
        )

    def _release(self, placement: LivePlacement, current: Pod | None = None) -> None:
        """Take back the object writes made for the placement, undo it (taking the API's
        `current` version of the pod into the cache when given), then let pods that waited for
        the room it held try again (kube does the same)."""
        self._take_back(placement)
        with self._lock:
            self._cycle.undo(placement)
            if current is not None:
                self._cache.add_pod(current)
        self._queue.move(BINDING_UNDONE)

    def _take_back(self, placement: LivePlacement) -> None:
        """Make the undo of every object write made for the placement, newest first. One that
        fails is logged and left: the binding is over either way."""
        while placement.written:
            write = placement.written.pop()
            if write.undo is None:
                continue
            try:
                self._objects.write(write.undo)
            except errors.APIError as e:
                log.error(
                    "Could not take back a write of a failed binding",
                    extra={"pod": placement.pod.key, "object": write.undo.describe(), "error": str(e)},
                )

    def _observe(self, placement: LivePlacement, point: ExtensionPoint, code: Code, start: float) -> float:
        now = time.perf_counter()
        observe = self._observers.get(placement.framework.profile)
        if observe is not None:
            observe(point, code, now - start)
        return now


def _reason(error: errors.APIError) -> str:
    """A short, bounded label for metrics: the error class (NotFound, Conflict, Unreachable, ...)."""
    return type(error).__name__


def _same_allocation(current: Pod, placement: LivePlacement, holdings: Holdings) -> bool:
    """Whether the pod's records of holdings are the ones this binding wrote."""
    wanted = placement.writes.annotations
    return all(current.annotations.get(key) == wanted.get(key) for key in holdings.annotations)
