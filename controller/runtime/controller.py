"""A controller: event sources feed keys into a work queue; workers reconcile them one key at a time.

This is the loop boundary of the controller manager: the one place that turns a reconcile's
outcome into what happens next (see `controller.runtime.errors`), counts it in the metrics, and
catches what nobody expected — logged with its stack, reported as an Event on the key's object,
retried with backoff — so a bug on one object never stops the others.

A controller runs only while started: the manager starts it when this replica becomes leader (or
at once without leader election) and stops it when leadership is lost. Each start gets a fresh
queue filled with every key the watched caches know (a full resync: the previous leader's work
may be unfinished), and event handlers add to whichever queue is current; while stopped they add
nothing, the informers just keep their caches warm.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from controller.runtime.errors import PermanentError, TemporaryError
from controller.runtime.metrics import ControllerMetrics, Metrics
from controller.runtime.ratelimit import RateLimiterSettings
from controller.runtime.reconciler import Reconciler
from controller.runtime.workqueue import WorkQueue
from kube.errors import APIError, TooManyRequests
from kube.events import ObjectReference
from kube.informer import Informer
from kube.logs import V

__all__ = ["Controller", "ControllerOptions", "EventSink"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Event reason for a reconcile that failed unexpectedly (a bug or an unforeseen state).
REASON_RECONCILE_ERROR = "ReconcileError"
_MAX_EVENT_MESSAGE = 512


class EventSink(Protocol):
    """Where failure Events go: `kube.EventRecorder` (a list in unit tests)."""

    def warning(self, ref: ObjectReference, reason: str, message: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    #: Reconciles in parallel (never two on the same key).
    workers: int = 2
    retries: RateLimiterSettings = field(default_factory=RateLimiterSettings)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")


@dataclass(frozen=True, slots=True)
class _Source:
    informer: Informer[Any]
    keys: Callable[[Any], Iterable[str]]


class Controller:
    def __init__(
        self,
        reconciler: Reconciler,
        *,
        options: ControllerOptions = ControllerOptions(),
        metrics: Metrics | None = None,
        events: EventSink | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reconciler = reconciler
        self.name = reconciler.name
        self.options = options
        self._metrics: ControllerMetrics = (metrics or Metrics()).controller(self.name)
        self._events = events
        self._clock = clock
        self._sources: list[_Source] = []
        self._lock = threading.Lock()
        self._queue: WorkQueue[str] | None = None
        self._workers: list[threading.Thread] = []
        # key -> (reason, message) of the failure last reported as an Event, so a state that keeps
        # failing the same way is reported once, not on every retry. Cleared when the key succeeds.
        self._reported: dict[str, tuple[str, str]] = {}

    # --- wiring -----------------------------------------------------------------------------------
    def watch(
        self,
        informer: Informer[T],
        keys: Callable[[T], Iterable[str]],
        *,
        changed: Callable[[T, T], bool] | None = None,
    ) -> None:
        """Reconcile the keys `keys(obj)` names whenever an object of `informer` is added, updated
        or deleted. `changed(old, new)` filters updates (resyncs, where old is new, always pass);
        on an update the keys of both versions are queued, so an object that moves is seen by both."""

        def on_add(obj: T) -> None:
            self.enqueue(*keys(obj))

        def on_update(old: T, new: T) -> None:
            if old is new or changed is None or changed(old, new):
                self.enqueue(*{*keys(old), *keys(new)})

        def on_delete(obj: T) -> None:
            self.enqueue(*keys(obj))

        informer.add_handlers(on_add=on_add, on_update=on_update, on_delete=on_delete)
        self._sources.append(_Source(informer, keys))

    def enqueue(self, *keys: str) -> None:
        """Queue keys for reconciling (dropped while the controller is stopped)."""
        queue = self._queue
        if queue is None:
            return
        for key in keys:
            queue.add(key)

    # --- lifecycle --------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._queue is not None

    def workers_alive(self) -> bool:
        """False when started and a worker thread has died (it never should: a health check)."""
        with self._lock:
            return all(t.is_alive() for t in self._workers)

    def start(self) -> None:
        """Start the workers on a fresh queue holding every key the watched caches know. Idempotent."""
        with self._lock:
            if self._queue is not None:
                return
            queue: WorkQueue[str] = WorkQueue(
                rate_limiter=self.options.retries.build(self._clock), clock=self._clock, observer=self._metrics
            )
            self._queue = queue
            for source in self._sources:
                for obj in source.informer.store.list():
                    for key in source.keys(obj):
                        queue.add(key)
            self._workers = [
                threading.Thread(target=self._work, args=(queue,), name=f"{self.name}-worker-{i}", daemon=True)
                for i in range(self.options.workers)
            ]
            for worker in self._workers:
                worker.start()
        log.log(V(1), "Controller started", extra={"controller": self.name, "workers": self.options.workers})

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking keys and wait for reconciles in flight to finish. Idempotent."""
        with self._lock:
            queue, self._queue = self._queue, None
            workers, self._workers = self._workers, []
        if queue is None:
            return
        queue.shutdown()
        self._metrics.depth(0)
        deadline = time.monotonic() + timeout
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                log.warning("Worker did not stop in time", extra={"controller": self.name, "worker": worker.name})
        log.log(V(1), "Controller stopped", extra={"controller": self.name})

    # --- the workers ------------------------------------------------------------------------------
    def _work(self, queue: WorkQueue[str]) -> None:
        while (key := queue.get()) is not None:
            try:
                self.process(queue, key)
            finally:
                queue.done(key)

    def process(self, queue: WorkQueue[str], key: str) -> str:
        """Reconcile `key` once and act on the outcome; returns the `result` label it was counted as.

        Never raises (but for BaseException such as KeyboardInterrupt)."""
        fields = {"controller": self.name, "key": key}
        start = time.monotonic()
        try:
            result = self.reconciler.reconcile(key)
        except TemporaryError as e:
            outcome = "temporary_error"
            log.log(V(2), "Reconcile to be retried", extra={**fields, "error": str(e), "delay": e.delay})
            if e.delay is None:
                queue.add_rate_limited(key)
            else:
                self._metrics.retried()
                queue.add_after(key, e.delay)
        except PermanentError as e:
            outcome = "permanent_error"
            log.warning("Reconcile failed; not retrying", extra={**fields, "reason": e.reason, "error": str(e)})
            queue.forget(key)
            self._report(key, e.reason, str(e), e.about)
        except APIError as e:
            outcome = "temporary_error"
            log.warning("API request failed; retrying", extra={**fields, "error": str(e)})
            if isinstance(e, TooManyRequests) and e.retry_after > 0:
                self._metrics.retried()
                queue.add_after(key, e.retry_after)
            else:
                queue.add_rate_limited(key)
        except Exception as e:
            outcome = "error"
            log.exception("Reconcile failed unexpectedly", extra=fields)
            message = f"{self.name}: {type(e).__name__}: {e}"[:_MAX_EVENT_MESSAGE]
            self._report(key, REASON_RECONCILE_ERROR, message, ())
            queue.add_rate_limited(key)
        else:
            queue.forget(key)
            self._reported.pop(key, None)
            if result.requeue_after is None:
                outcome = "success"
            else:
                outcome = "requeue"
                queue.add_after(key, result.requeue_after)
        self._metrics.reconciled(outcome, time.monotonic() - start)
        log.log(V(5), "Reconciled", extra={**fields, "result": outcome})
        return outcome

    def _report(self, key: str, reason: str, message: str, about: tuple[ObjectReference, ...]) -> None:
        if self._events is None or self._reported.get(key) == (reason, message):
            return
        self._reported[key] = (reason, message)
        refs = about
        if not refs:
            try:
                ref = self.reconciler.reference(key)
            except Exception:
                log.exception("Finding the object of a key failed", extra={"controller": self.name, "key": key})
                ref = None
            refs = (ref,) if ref is not None else ()
        for ref in refs:
            self._events.warning(ref, reason, message)
