"""Reservations to place, through the scheduling queue as their reserve pods: the live
scheduler's handlers on the Reservation watch the Reservation plugin opens (its feed keeps the
cache's held Reservations; without the plugin no Reservation is watched, placed or held, as in
Koordinator, where its plugin registers the handlers).

What each change means to the queue, in one place:

- a Reservation **pending** (no node, not terminal) is queued as its reserve pod
  (`api.reserve_pod`), and retried like a pod when it does not fit (`spec.unschedulable` keeps
  new owners off a placed one, as in Koordinator, not the Reservation itself off a node);
- a Reservation **placed** leaves the queue;
- a Reservation **terminal** (Succeeded, Failed) or **deleted** leaves the queue;
- a Reservation that **does not parse** (a bad ttl, a template that is no valid pod, ...) gets a
  Warning Event naming the field, and the controller writes its Scheduled condition (reason
  Invalid); the informer keeps the last good version, and the scheduler goes on.

`owns(uid)` says which queued pods are reserve pods (the loop routes their placements and
failures to the Reservation's binder and reporter).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from apis.crds.reservation import GROUP_VERSION, KIND, Reservation
from apis.errors import TesseraError
from apis.extension import names
from kube import EventRecorder, ObjectReference
from scheduler.core.reservations import REASON_INVALID
from scheduler.framework.feeds import Feeds, Handlers, Watch
from scheduler.service.queue import SchedulingQueue
from scheduler.service.reporter import FailureReporter
from scheduler.service.reservations.api import reserve_pod

__all__ = ["REASON_INVALID_RESERVATION", "RESERVATIONS", "PendingReservations"]

log = logging.getLogger(__name__)

REASON_INVALID_RESERVATION = "FailedParsing"
#: The Reservation watch (the Reservation plugin opens it; these handlers follow it).
RESERVATIONS = Watch(names.RESERVATIONS, Reservation.from_dict)


class PendingReservations:
    def __init__(
        self,
        feeds: Feeds,
        *,
        queue: SchedulingQueue,
        profiles: tuple[str, ...],
        recorder: EventRecorder,
        reporter: FailureReporter,
        on_invalid: Callable[[str, str, str], None],
        on_unserved: Callable[[str, ObjectReference, str], None] = lambda _uid, _ref, _name: None,
        on_served: Callable[[str], None] = lambda _uid: None,
    ) -> None:
        """Follow the Reservation watch of `feeds` (when a plugin opens it). `profiles`: ours,
        the first taking Reservations whose template names no scheduler. `on_invalid(name, uid,
        message)` is told about a Reservation that does not parse; `on_unserved(uid, ref,
        schedulerName)` about a pending one whose template names a scheduler no profile serves,
        `on_served(uid)` when that is over."""
        self._on_unserved = on_unserved
        self._on_served = on_served
        self._queue = queue
        self._profiles = profiles
        self._recorder = recorder
        self._reporter = reporter
        self._on_invalid = on_invalid
        self._guard = threading.Lock()
        self._uids: set[str] = set()
        handlers = Handlers(
            added=self._changed,
            updated=lambda _old, new: self._changed(new),
            deleted=self._deleted,
            invalid=self._invalid,
            opens=False,
        )
        feeds.watch(RESERVATIONS, handlers)

    def owns(self, uid: str) -> bool:
        """Whether `uid` is a (non-terminal) Reservation's: its reserve pod's. Thread-safe."""
        with self._guard:
            return uid in self._uids

    def _invalid(self, raw: Mapping[str, Any], error: TesseraError) -> None:
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
        message = f"the scheduler cannot read this Reservation: {error}"
        log.warning("Invalid reservation", extra={"reservation": name, "error": str(error)})
        if not _says(raw, message):  # else said already: writing it again would loop
            self._recorder.warning(
                ObjectReference(KIND, name, "", uid, GROUP_VERSION), REASON_INVALID_RESERVATION, message
            )
            self._on_invalid(name, uid, message)

    def _changed(self, reservation: Reservation) -> None:
        uid = reservation.uid
        if reservation.phase.terminal or reservation.meta.deletion_timestamp:
            self._deleted(reservation)
            return
        with self._guard:
            self._uids.add(uid)
        if reservation.node_name:
            self._on_served(uid)
            self._queue.done(uid)
            self._reporter.forget(uid)
            return
        pod = reserve_pod(reservation, scheduler_name=self._profiles[0])
        if pod.scheduler_name not in self._profiles:
            ref = ObjectReference(KIND, reservation.name, "", uid, GROUP_VERSION)
            self._on_unserved(uid, ref, pod.scheduler_name)
            self._queue.delete(uid)
            return
        self._on_served(uid)
        self._queue.add(pod)

    def _deleted(self, reservation: Reservation) -> None:
        uid = reservation.uid
        self._on_served(uid)
        with self._guard:
            self._uids.discard(uid)
        self._queue.delete(uid)
        self._reporter.forget(uid)


def _says(raw: Mapping[str, Any], message: str) -> bool:
    """Whether the raw Reservation's status already carries the Invalid condition with `message`."""
    status = raw.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("reason") == REASON_INVALID and c.get("message") == message for c in conditions
    )
