"""Pods and Reservations that wait for a schedulerName no profile of this scheduler serves.

Koordinator's manuals name `koord-scheduler`; a typo, or a name only another cluster's scheduler
serves, used to leave a pod Pending with no word. Each such object gets one Warning Event
(`SchedulerNameNotServed`) saying which names this scheduler serves — and that another scheduler
may serve its name: a real cluster usually runs kube-scheduler for `default-scheduler`. So that
such a cluster is not flooded with Events about pods kube-scheduler binds in a moment, an object
is told only once it has waited `grace` seconds unplaced (the scheduler's leader checks every
`grace / 4` seconds), and once per object (its uid) for the life of this process.

`UnservedNames` is thread-safe: the informers report what they see, a thread of its own tells.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kube.events import EventRecorder, ObjectReference

__all__ = ["REASON_NOT_SERVED", "UnservedNames"]

log = logging.getLogger(__name__)

REASON_NOT_SERVED = "SchedulerNameNotServed"


@dataclass(slots=True)
class _Waiting:
    ref: ObjectReference
    scheduler_name: str
    since: float


class UnservedNames:
    def __init__(
        self,
        recorder: EventRecorder,
        served: Iterable[str],
        *,
        component: str,
        grace: float,
        is_leader: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._recorder = recorder
        self._served = ", ".join(sorted(served))
        self._component = component
        self.grace = grace
        self._is_leader = is_leader
        self._clock = clock
        self._lock = threading.Lock()
        self._waiting: dict[str, _Waiting] = {}
        self._told: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def waiting(self, uid: str, ref: ObjectReference, scheduler_name: str) -> None:
        """The object `uid` waits for `scheduler_name`, which no profile here serves."""
        with self._lock:
            if uid in self._told:
                return
            found = self._waiting.get(uid)
            if found is None or found.scheduler_name != scheduler_name:
                self._waiting[uid] = _Waiting(ref, scheduler_name, self._clock())

    def forget(self, uid: str) -> None:
        """The object was placed, deleted, or names a served scheduler now."""
        with self._lock:
            self._waiting.pop(uid, None)
            self._told.discard(uid)

    def tell_due(self) -> int:
        """Record the Event of every object that has waited `grace` seconds (the leader only);
        how many were told."""
        if not self._is_leader():
            return 0
        now = self._clock()
        with self._lock:
            due = [(uid, w) for uid, w in self._waiting.items() if now - w.since >= self.grace]
            for uid, _ in due:
                del self._waiting[uid]
                self._told.add(uid)
        for _, w in due:
            message = (
                f"no profile of {self._component} serves schedulerName {w.scheduler_name!r} "
                f"(it serves {self._served}); another scheduler may serve it"
            )
            self._recorder.warning(w.ref, REASON_NOT_SERVED, message)
            log.info(
                "Scheduler name not served",
                extra={"object": f"{w.ref.namespace}/{w.ref.name}", "schedulerName": w.scheduler_name},
            )
        return len(due)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="unserved-names", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        period = max(0.5, self.grace / 4)
        while not self._stop.wait(period):
            try:
                self.tell_due()
            except Exception:  # a loop boundary: log and go on
                log.exception("Telling about unserved scheduler names failed")
