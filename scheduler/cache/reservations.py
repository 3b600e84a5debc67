"""Reservations as the cache sees them: which are held on which node, and which owner consumed which.

An Available Reservation (`apis.crds.reservation`) is counted on its node as a pod — its
`reserve_pod()`, with the devices its `device-allocated` annotation names — so every pod that is
not its owner finds those resources used, with no plugin knowing about Reservations. The owners
are told apart here: `ReservationBook` keeps the held Reservations per node and answers, for a
pod being scheduled, which Reservation it may use on each node (`HeldReservation`).

A pod placed onto a Reservation consumes it: the Reservation stops being counted (the pod now
is), and is remembered as consumed by that pod, so that the Reservation's own updates (still
`Available` until its status says otherwise) never count it a second time, and a restart that
sees the pod's `reservation-allocated` annotation before or after the Reservation comes to the
same state. An `allocateOnce` Reservation stays consumed for good; one that is not goes back to
being held when its last consumer is gone.

Pure bookkeeping, driven by `ClusterCache` under its contract (one thread, no I/O).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from apis.crds.device import DeviceType
from apis.crds.reservation import Reservation
from apis.extension import names
from apis.extension.allocation import DeviceAllocation
from scheduler.cache.podinfo import PodInfo

__all__ = ["HeldReservation", "ReservationBook"]


@dataclass(frozen=True, slots=True)
class HeldReservation:
    """A Reservation whose resources are set aside on `node` for its owners."""

    reservation: Reservation
    #: The reserve pod as the cache counts it (requests; devices from the annotation).
    pod: PodInfo

    @property
    def uid(self) -> str:
        return self.pod.ident

    @property
    def name(self) -> str:
        return self.reservation.name

    @property
    def node(self) -> str:
        return self.pod.node_name

    @property
    def allocations(self) -> Mapping[DeviceType, tuple[DeviceAllocation, ...]]:
        return self.pod.allocations

    def devices_fit(self, pod: PodInfo) -> bool:
        """Whether the reserved devices are exactly what `pod` asks for (same device resources),
        so the pod can be given them as they are: the reserved GPUs, the reserved share."""
        if not self.allocations:
            return False
        return all(pod.requests.get(n, 0) == self.pod.requests.get(n, 0) for n in names.DEVICE_RESOURCES)


@dataclass(slots=True)
class ReservationBook:
    """Known Reservations, those held per node, and consumption by owners. See the module docstring."""

    #: Every Reservation the cache was told about and that is not terminal, by UID.
    known: dict[str, Reservation] = field(default_factory=dict)
    #: node -> uid -> the Reservation held there.
    held: dict[str, dict[str, HeldReservation]] = field(default_factory=dict)
    #: Reservation UID (or name, when the pod's annotation gives no UID) -> pods that consumed it.
    consumers: dict[str, set[str]] = field(default_factory=dict)
    #: pod ident -> the Reservation UID (or name) it consumed.
    consumed_by: dict[str, str] = field(default_factory=dict)

    def uid_of(self, name: str, uid: str) -> str:
        """The UID of a Reservation named by a pod's annotation (which may lack the UID)."""
        if uid:
            return uid
        return next((r.uid for r in self.known.values() if r.name == name), name)

    def is_consumed(self, reservation: Reservation) -> bool:
        """Whether an owner holds (or held, for allocateOnce) the Reservation's resources."""
        ident = reservation.uid
        if reservation.allocate_once and reservation.current_owners:
            return True
        return bool(self.consumers.get(ident) or self.consumers.get(reservation.name))

    def hold(self, held: HeldReservation) -> None:
        self.held.setdefault(held.node, {})[held.uid] = held

    def unhold(self, uid: str) -> HeldReservation | None:
        for node, entries in self.held.items():
            found = entries.pop(uid, None)
            if found is not None:
                if not entries:
                    del self.held[node]
                return found
        return None

    def on_node(self, node: str) -> Iterable[HeldReservation]:
        return self.held.get(node, {}).values()

    def all_held(self) -> list[HeldReservation]:
        return [h for entries in self.held.values() for h in entries.values()]

    def for_pod(self, pod: PodInfo) -> dict[str, HeldReservation]:
        """Per node, the held Reservation `pod` may use there (the first by name among those whose
        owners it matches); empty for a reserve pod itself or a pod that opts out."""
        if not self.held or pod.ident in self.known:
            return {}
        out: dict[str, HeldReservation] = {}
        for node, entries in self.held.items():
            matching = [h for h in entries.values() if h.reservation.matches_owner(pod.pod)]
            if matching:
                out[node] = min(matching, key=lambda h: h.name)
        return out

    def consume(self, uid: str, pod: str) -> None:
        self.consumers.setdefault(uid, set()).add(pod)
        self.consumed_by[pod] = uid

    def give_back(self, pod: str) -> str | None:
        """The pod no longer uses what it consumed; the Reservation's UID when nobody else does."""
        uid = self.consumed_by.pop(pod, None)
        if uid is None:
            return None
        pods = self.consumers.get(uid)
        if pods is not None:
            pods.discard(pod)
            if not pods:
                del self.consumers[uid]
                return uid
        return None

    def forget(self, uid: str) -> None:
        self.known.pop(uid, None)
        self.unhold(uid)
        for pod in self.consumers.pop(uid, set()):
            self.consumed_by.pop(pod, None)
