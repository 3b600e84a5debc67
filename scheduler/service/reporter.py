"""Telling users why a pod is not scheduled: its PodScheduled condition and a FailedScheduling Event.

The scheduling loop calls `unschedulable(pod, message)` and goes on; a worker thread does the
API calls, so a slow API server never stalls a cycle. Reports are coalesced per pod (only the
latest counts), the condition is written only when it changes, and the Event for the same pod
and message is repeated at most every `event_interval` seconds (the recorder then bumps the
existing Event's count) — retries never become an event storm.

A stale record of what a pod holds on a pending pod (an annotation its holdings sources read,
`Holdings.annotations`, left by a binding that failed, or by a scheduler killed between
annotating and binding) is removed here too, with the pod's resourceVersion as a precondition:
if anything wrote the pod since the failed attempt (such as the next attempt's PreBind), the
removal is skipped. It never counted for anything — the cache only accounts assigned pods — but
it should not tell people or tools about devices the pod does not have.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from apis.k8s.core import CONDITION_POD_SCHEDULED, Pod
from kube import EventRecorder, ObjectReference, errors
from kube.logs import V
from scheduler.cache import Holdings
from scheduler.service.podapi import PodAPI

__all__ = ["REASON_SCHEDULER_ERROR", "REASON_UNSCHEDULABLE", "FailureReporter"]

log = logging.getLogger(__name__)

REASON_UNSCHEDULABLE = "Unschedulable"
#: kube-scheduler's condition reason when scheduling failed for another cause (a binding error).
REASON_SCHEDULER_ERROR = "SchedulerError"
EVENT_FAILED_SCHEDULING = "FailedScheduling"
_MEMORY = 16384


@dataclass(frozen=True, slots=True)
class _Report:
    pod: Pod
    reason: str
    message: str


class FailureReporter:
    def __init__(
        self,
        api: PodAPI,
        recorder: EventRecorder,
        *,
        event_interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        refer: Callable[[Pod], ObjectReference] = ObjectReference.of,
        holdings: Holdings | None = None,
    ) -> None:
        """`refer` names the object Events are about (a Reservation's reporter names the
        Reservation); `holdings` says which annotations are records of what a pod holds (the
        cache's; the default sources without one)."""
        self._api = api
        self._holdings = holdings if holdings is not None else Holdings()
        self._refer = refer
        self._recorder = recorder
        self._event_interval = event_interval
        self._clock = clock
        self._cond = threading.Condition()
        self._pending: collections.OrderedDict[str, _Report] = collections.OrderedDict()
        #: uid -> (message, when) of the last Event, to repeat it only every event_interval.
        self._events: collections.OrderedDict[str, tuple[str, float]] = collections.OrderedDict()
        self._stopped = False
        self._busy = False
        self._thread: threading.Thread | None = None

    def unschedulable(self, pod: Pod, message: str, *, reason: str = REASON_UNSCHEDULABLE) -> None:
        """Report a failed attempt. Never blocks on the API; a later report of the pod replaces it."""
        uid = pod.uid or pod.key
        with self._cond:
            self._pending[uid] = _Report(pod, reason, message)
            self._pending.move_to_end(uid)
            self._cond.notify()

    def forget(self, uid: str) -> None:
        """The pod is bound or gone: drop what is queued and remembered for it."""
        with self._cond:
            self._pending.pop(uid, None)
            self._events.pop(uid, None)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="scheduler-failure-reporter", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Send what is queued (within `timeout`), then stop. Idempotent."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def wait_idle(self, timeout: float) -> bool:
        """True once nothing is queued or being written (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if not self._pending:
                    return
                _, report = self._pending.popitem(last=False)
                self._busy = True
            try:
                self._write(report)
            except Exception:
                log.exception("Reporting a scheduling failure failed", extra={"pod": report.pod.key})
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _write(self, report: _Report) -> None:
        pod = report.pod
        try:
            stale = self._holdings.carried(pod) if not pod.node_name else frozenset()
            if stale:
                self._remove_stale_records(pod, stale)
            if not _has_condition(pod, report.reason, report.message):
                self._api.set_condition(pod, status="False", reason=report.reason, message=report.message)
        except errors.NotFound:
            return  # deleted meanwhile
        except errors.APIError as e:
            log.warning("Could not set the PodScheduled condition", extra={"pod": pod.key, "error": str(e)})
        self._event(pod, report.message)

    def _remove_stale_records(self, pod: Pod, stale: frozenset[str]) -> None:
        try:
            self._api.annotate(pod, dict.fromkeys(sorted(stale)), resource_version=pod.meta.resource_version)
        except errors.Conflict:
            log.log(V(4), "Pod changed since the attempt; stale allocation left for later", extra={"pod": pod.key})
            return
        log.log(V(2), "Removed a stale device allocation from a pending pod", extra={"pod": pod.key})

    def _event(self, pod: Pod, message: str) -> None:
        uid = pod.uid or pod.key
        now = self._clock()
        with self._cond:
            last = self._events.get(uid)
            if last is not None and last[0] == message and now - last[1] < self._event_interval:
                return
            self._events[uid] = (message, now)
            self._events.move_to_end(uid)
            while len(self._events) > _MEMORY:
                self._events.popitem(last=False)
        self._recorder.warning(self._refer(pod), EVENT_FAILED_SCHEDULING, message)


def _has_condition(pod: Pod, reason: str, message: str) -> bool:
    return any(
        c.type == CONDITION_POD_SCHEDULED and c.status == "False" and c.reason == reason and c.message == message
        for c in pod.conditions
    )
