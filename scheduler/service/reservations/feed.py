"""The Reservation informer (cluster-scoped), wired into the cache and the scheduling queue.

What each change means, in one place:

- a Reservation **placed and Available** (or Waiting) is held in the cache on its node
  (`ClusterCache.add_reservation`), confirming the assumption made while it was bound, and
  leaves the queue;
- a Reservation **pending** (no node, not terminal) is queued as its reserve pod
  (`api.reserve_pod`), and retried like a pod when it does not fit (`spec.unschedulable` keeps
  new owners off a placed one, as in Koordinator, not the Reservation itself off a node);
- a Reservation **terminal** (Succeeded, Failed) or **deleted** holds nothing any more: it leaves
  the cache, the queue and the quota manager (what ElasticQuota's Reserve charged for it), and
  the pods that waited for room are moved;
- a Reservation that **does not parse** (a bad ttl, a template that is no valid pod, ...) gets a
  Warning Event naming the field, and the controller writes its Scheduled condition (reason
  Invalid); the informer keeps the last good version, and the scheduler goes on.

Handlers run on the informer's dispatcher thread and take the cache lock for the cache call only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from apis.crds.reservation import GROUP_VERSION, KIND, Reservation
from apis.errors import TesseraError
from apis.extension import names
from apis.k8s.core import Pod
from kube import Client, EventRecorder, Informer, ObjectReference
from scheduler.cache import ClusterCache
from scheduler.core.reservations import REASON_INVALID
from scheduler.service.queue import POD_DELETED, SchedulingQueue
from scheduler.service.reporter import FailureReporter
from scheduler.service.reservations.api import reserve_pod

__all__ = ["REASON_INVALID_RESERVATION", "ReservationFeed"]

log = logging.getLogger(__name__)

REASON_INVALID_RESERVATION = "FailedParsing"


class ReservationFeed:
    def __init__(
        self,
        client: Client,
        *,
        lock: threading.RLock,
        cache: ClusterCache,
        queue: SchedulingQueue,
        profiles: tuple[str, ...],
        recorder: EventRecorder,
        reporter: FailureReporter,
        on_invalid: Callable[[str, str, str], None],
        on_released: Callable[[Pod], None] = lambda _pod: None,
        on_unserved: Callable[[str, ObjectReference, str], None] = lambda _uid, _ref, _name: None,
        on_served: Callable[[str], None] = lambda _uid: None,
    ) -> None:
        """`profiles`: ours, the first taking Reservations whose template names no scheduler.
        `on_invalid(name, uid, message)` is told about a Reservation that does not parse;
        `on_released(reserve_pod)` about one that holds nothing any more (the quota manager
        forgets what a Reserve charged for it); `on_unserved(uid, ref, schedulerName)` about a
        pending one whose template names a scheduler no profile serves, `on_served(uid)` when
        that is over."""
        self._on_released = on_released
        self._on_unserved = on_unserved
        self._on_served = on_served
        self._lock = lock
        self._cache = cache
        self._queue = queue
        self._profiles = profiles
        self._recorder = recorder
        self._reporter = reporter
        self._on_invalid = on_invalid
        self._guard = threading.Lock()
        self._uids: set[str] = set()
        self.informer: Informer[Reservation] = Informer(client, names.RESERVATIONS, parse=self._parse)
        self.informer.add_handlers(lambda r: self._changed(None, r), self._changed, self._deleted)

    def owns(self, uid: str) -> bool:
        """Whether `uid` is a (non-terminal) Reservation's: its reserve pod's. Thread-safe."""
        with self._guard:
            return uid in self._uids

    def start(self) -> None:
        self.informer.start()

    def wait_for_sync(self, timeout: float | None) -> bool:
        return self.informer.wait_for_sync(timeout)

    def stop(self) -> None:
        if self.informer.started:
            self.informer.stop()

    def _parse(self, raw: dict[str, Any]) -> Reservation:
        try:
            return Reservation.from_dict(raw)
        except TesseraError as e:
            meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
            assert isinstance(meta, dict)
            name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
            message = f"the scheduler cannot read this Reservation: {e}"
            log.warning("Invalid reservation", extra={"reservation": name, "error": str(e)})
            if not _says(raw, message):  # else said already: writing it again would loop
                self._recorder.warning(
                    ObjectReference(KIND, name, "", uid, GROUP_VERSION), REASON_INVALID_RESERVATION, message
                )
                self._on_invalid(name, uid, message)
            raise

    def _changed(self, old: Reservation | None, reservation: Reservation) -> None:
        uid = reservation.uid
        if reservation.phase.terminal or reservation.meta.deletion_timestamp:
            self._deleted(reservation)
            return
        with self._guard:
            self._uids.add(uid)
        with self._lock:
            self._cache.add_reservation(reservation)
        if reservation.node_name:
            self._on_served(uid)
            self._queue.done(uid)
            self._reporter.forget(uid)
            if old is not None and not old.node_name:
                log.info("Reservation placed", extra={"reservation": reservation.name, "node": reservation.node_name})
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
        with self._lock:
            self._cache.remove_reservation(uid)
        self._on_released(reservation.reserve_pod())
        self._queue.delete(uid)
        self._reporter.forget(uid)
        if reservation.node_name:
            log.info(
                "Reservation released",
                extra={
                    "reservation": reservation.name,
                    "node": reservation.node_name,
                    "phase": reservation.phase.value,
                },
            )
            self._queue.move(POD_DELETED)  # its room is free


def _says(raw: dict[str, Any], message: str) -> bool:
    """Whether the raw Reservation's status already carries the Invalid condition with `message`."""
    status = raw.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("reason") == REASON_INVALID and c.get("message") == message for c in conditions
    )
