"""The Reservation controller of the leading scheduler: status that follows from the cluster.

Run by the leader only (a follower's informers stay warm). Every `interval` seconds (and at once
when a Reservation that does not parse is reported), one pass over the Reservations that are not
over (none: the pods are not even looked at):

- **owners**: bound pods whose `reservation-allocated` annotation names a Reservation are its
  `currentOwners` (and `allocated` their requests); an allocateOnce Reservation is then
  Succeeded and holds nothing. The pod's annotation is written before it is bound, so a
  scheduler that died in between finds the pod and finishes the job on its next pass. An owner
  deleted before a pass saw it (a rollout scaling its ReplicaSet down at once) still counts for
  an allocateOnce one: the pod informer's deletions are remembered until the next pass, else the
  Reservation would stay Available, hold again after a restart what its owner had used and
  others were given since (found by the soak). The owners of one that is not allocateOnce are
  those bound now: one gone leaves `currentOwners`, and what it took is the next owner's. The
  pods a Reservation was placed over (pre-allocation) count as the owners of a shared one do,
  also in an allocateOnce one: they do not consume it, and one gone leaves it;
- **expiry**: a Reservation whose `expiry()` passed is Failed, Ready False with reason Expired
  (Koordinator's), and its resources are released (the informer's update): an allocateOnce one
  only while unused (used, it is Succeeded), one that is not whether or not owners run on it;
- **invalid**: a Reservation that does not parse gets its Scheduled condition False, reason
  Invalid, saying why (the Warning Event was recorded by the feed).

Writes go through the status subresource, conditional on the version read; a conflict is left to
the next pass. `tessera_scheduler_reservations{phase}` counts them at scrape time.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from apis.crds.reservation import (
    GROUP_VERSION,
    KIND,
    REASON_EXPIRED,
    Reservation,
    ReservationPhase,
    allocated_from_pod,
)
from apis.errors import AnnotationError
from apis.extension import names
from apis.k8s.core import Pod
from apis.k8s.meta import now_rfc3339
from kube import Client, EventRecorder, Informer, ObjectReference, errors
from scheduler.core import reservations as transitions

__all__ = ["ReservationController"]

log = logging.getLogger(__name__)

REASON_EXPIRED_EVENT = "Expired"
REASON_ALLOCATED_EVENT = "Allocated"


class ReservationController:
    def __init__(
        self,
        client: Client,
        *,
        reservations: Informer[Reservation],
        pods: Informer[Pod],
        recorder: EventRecorder,
        is_leader: Callable[[], bool],
        registry: CollectorRegistry | None = None,
        interval: float = 1.0,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self._api = client.resource(names.RESERVATIONS)
        self._reservations = reservations
        self._pods = pods
        self._recorder = recorder
        self._is_leader = is_leader
        self._interval = interval
        self._now = now
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()
        #: name -> (uid, message) of Reservations that do not parse, to be written.
        self._invalid: dict[str, tuple[str, str]] = {}
        #: Owners deleted since the last pass (pod uid or key -> the pod as last seen).
        self._departed: dict[str, Pod] = {}
        pods.add_handlers(on_delete=self._pod_deleted)
        if registry is not None:
            registry.register(_PhaseCollector(reservations))

    def invalid(self, name: str, uid: str, message: str) -> None:
        """Say on the Reservation why it cannot be read (written by the next pass)."""
        with self._guard:
            self._invalid[name] = (uid, message)
        self._wake.set()

    def _pod_deleted(self, pod: Pod) -> None:
        if pod.node_name and pod.meta.annotations.get(names.ANNOTATION_RESERVATION_ALLOCATED):
            with self._guard:
                self._departed[pod.uid or pod.key] = pod
            self._wake.set()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="scheduler-reservations", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._stop.is_set():
                continue
            if not self._is_leader():
                with self._guard:
                    self._departed.clear()  # the leader's own informer saw the same deletions
                continue
            try:
                self.run_once()
            except Exception:
                log.exception("Reservation pass failed")

    def run_once(self) -> None:
        """One pass (see the module docstring). Never raises for an API error."""
        live = [r for r in self._reservations.store.list() if not r.phase.terminal]
        with self._guard:
            departed, self._departed = self._departed, {}
        bound = self._owners() if live else {}
        owners = self._owners(departed.values()) if live and departed else bound
        now = self._now()
        for reservation in live:
            if not reservation.allocate_once:
                if reservation.expired(now):
                    self._expired(reservation)
                elif reservation.node_name and reservation.phase.holds_resources:
                    self._consumed(reservation, _of(reservation, bound))
                continue
            # Its owners even if gone since; the pods it was placed over as they are now.
            used = [p for p in _of(reservation, owners) if not reservation.is_pre_allocated(p)]
            mine = used + [p for p in _of(reservation, bound) if reservation.is_pre_allocated(p)]
            if used and reservation.phase.holds_resources:
                self._consumed(reservation, mine)
            elif not used and reservation.expired(now):
                self._expired(reservation)
            elif reservation.phase.holds_resources and (mine or reservation.current_owners):
                self._consumed(reservation, mine)  # pre-allocated pods only: it stays Available
        with self._guard:
            invalid, self._invalid = self._invalid, {}
        for name, (uid, message) in invalid.items():
            self._write_invalid(name, uid, message)

    def _owners(self, departed: Iterable[Pod] = ()) -> dict[str, list[Pod]]:
        """Reservation UID (or name, when the annotation has no UID) -> bound pods placed onto it,
        those deleted since the last pass included."""
        out: dict[str, list[Pod]] = {}
        for pod in itertools.chain(self._pods.store.list(), departed):
            if not pod.node_name or pod.is_terminal:
                continue
            try:
                allocated = allocated_from_pod(pod)
            except AnnotationError:
                continue  # the cache logs it
            if allocated is not None:
                out.setdefault(allocated.uid or allocated.name, []).append(pod)
        return out

    def _consumed(self, reservation: Reservation, owners: Sequence[Pod]) -> None:
        after = transitions.consumed(reservation, owners, now=now_rfc3339())
        if (after.current_owners, after.allocated, after.phase) == (
            reservation.current_owners,
            reservation.allocated,
            reservation.phase,
        ):
            return
        if not self._write(reservation, after):
            return
        if after.phase is ReservationPhase.SUCCEEDED:
            keys = ", ".join(sorted(p.key for p in owners))
            self._recorder.normal(_ref(reservation), REASON_ALLOCATED_EVENT, f"allocated to {keys}")
            log.info("Reservation succeeded", extra={"reservation": reservation.name, "owners": keys})
            return
        before = {(o.namespace, o.name) for o in reservation.current_owners}
        joined = ", ".join(sorted(p.key for p in owners if (p.namespace, p.name) not in before))
        if joined:  # one more owner shares it
            self._recorder.normal(_ref(reservation), REASON_ALLOCATED_EVENT, f"allocated to {joined}")
            log.info("Reservation shared", extra={"reservation": reservation.name, "owners": joined})

    def _expired(self, reservation: Reservation) -> None:
        after = transitions.expired(reservation, now=now_rfc3339())
        if self._write(reservation, after):
            message = next((c.message for c in after.conditions if c.reason == REASON_EXPIRED), "")
            self._recorder.normal(_ref(reservation), REASON_EXPIRED_EVENT, message)
            log.info("Reservation expired", extra={"reservation": reservation.name, "node": reservation.node_name})

    def _write(self, before: Reservation, after: Reservation) -> bool:
        meta = {"uid": before.uid, "resourceVersion": before.meta.resource_version}
        try:
            self._api.patch(
                before.name, {"metadata": meta, "status": transitions.status_of(after)}, subresource="status"
            )
        except (errors.Conflict, errors.NotFound):
            return False  # changed or gone meanwhile: the next pass sees the new version
        except errors.APIError as e:
            log.warning("Could not write reservation status", extra={"reservation": before.name, "error": str(e)})
            return False
        return True

    def _write_invalid(self, name: str, uid: str, message: str) -> None:
        status = transitions.invalid_status(message, now=now_rfc3339())
        try:
            self._api.patch(name, {"metadata": {"uid": uid}, "status": status}, subresource="status")
        except errors.APIError as e:
            log.warning("Could not write reservation status", extra={"reservation": name, "error": str(e)})


def _of(reservation: Reservation, owners: dict[str, list[Pod]]) -> list[Pod]:
    """The pods of `owners` (by Reservation UID or name) placed onto `reservation`, once each."""
    found = {p.uid or p.key: p for key in (reservation.uid, reservation.name) for p in owners.get(key, ())}
    return list(found.values())


def _ref(reservation: Reservation) -> ObjectReference:
    return ObjectReference(KIND, reservation.name, "", reservation.uid, GROUP_VERSION)


class _PhaseCollector(Collector):
    """`tessera_scheduler_reservations{phase}`, from the informer's store at scrape time."""

    def __init__(self, reservations: Informer[Reservation]) -> None:
        self._reservations = reservations

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = dict.fromkeys((p.value for p in ReservationPhase), 0)
        for reservation in self._reservations.store.list():
            phase = "Expired" if reservation.is_expired else reservation.phase.value
            counts[phase] = counts.get(phase, 0) + 1
        family = GaugeMetricFamily("tessera_scheduler_reservations", "Reservations by phase.", labels=["phase"])
        for phase, count in sorted(counts.items()):
            family.add_metric([phase], count)
        yield family
