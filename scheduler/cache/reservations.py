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

from collections.abc import Callable, Iterable, Mapping
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
    #: Owner index of the held Reservations: a key every owner of one must carry (see
    #: `_owner_keys`) -> their UIDs; `_ANY` for those no key narrows.
    by_key: dict[tuple[str, ...], set[str]] = field(default_factory=dict)
    #: uid -> node, of the held Reservations.
    node_of: dict[str, str] = field(default_factory=dict)

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
        self.unhold(held.uid)
        self.held.setdefault(held.node, {})[held.uid] = held
        self.node_of[held.uid] = held.node
        for key in _owner_keys(held.reservation):
            self.by_key.setdefault(key, set()).add(held.uid)

    def unhold(self, uid: str) -> HeldReservation | None:
        node = self.node_of.pop(uid, None)
        entries = self.held.get(node, {}) if node is not None else {}
        found = entries.pop(uid, None)
        if node is not None and not entries:
            self.held.pop(node, None)
        if found is not None:
            for key in _owner_keys(found.reservation):
                uids = self.by_key.get(key)
                if uids is not None:
                    uids.discard(uid)
                    if not uids:
                        del self.by_key[key]
        return found

    def on_node(self, node: str) -> Iterable[HeldReservation]:
        return self.held.get(node, {}).values()

    def all_held(self) -> list[HeldReservation]:
        return [h for entries in self.held.values() for h in entries.values()]

    def for_pod(self, pod: PodInfo, accept: Callable[[Reservation], bool] | None = None) -> dict[str, HeldReservation]:
        """Per node, the held Reservation `pod` may use there (the first by name among those whose
        owners it matches, and that `accept` takes); empty for a reserve pod itself or a pod that
        opts out."""
        if not self.held or pod.ident in self.known:
            return {}
        candidates: set[str] = set()
        for key in _pod_keys(pod):
            candidates.update(self.by_key.get(key, ()))
        out: dict[str, HeldReservation] = {}
        for uid in candidates:
            held = self.held[self.node_of[uid]][uid]
            if held.reservation.matches_owner(pod.pod) and (accept is None or accept(held.reservation)):
                best = out.get(held.node)
                if best is None or held.name < best.name:
                    out[held.node] = held
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


#: The index key of Reservations with an owner no key narrows (every pod is a candidate).
_ANY: tuple[str, ...] = ("any",)


def _owner_keys(reservation: Reservation) -> set[tuple[str, ...]]:
    """Keys of which a pod must carry one to match an owner of `reservation`: per owner, one it
    needs for sure (a label of its selector, its object's UID or name, its controller's UID or
    name), or `_ANY`. Matching stays `Reservation.matches_owner`; the keys only skip the
    Reservations a pod cannot match, so a cycle costs the same with 100 of them held."""
    keys: set[tuple[str, ...]] = set()
    for owner in reservation.owners:
        selector, ref, controller = owner.label_selector, owner.object_ref, owner.controller
        if selector is not None and selector.match_labels:
            key, value = min(selector.match_labels.items())
            keys.add(("label", key, value))
        elif ref is not None and (ref.uid or ref.name):
            keys.add(("pod-uid", ref.uid) if ref.uid else ("pod-name", ref.name))
        elif controller is not None and (controller.uid or controller.name):
            keys.add(("owner-uid", controller.uid) if controller.uid else ("owner-name", controller.name))
        else:
            keys.add(_ANY)
    return keys


def _pod_keys(pod: PodInfo) -> list[tuple[str, ...]]:
    """The keys `pod` carries (see `_owner_keys`)."""
    meta = pod.pod.meta
    keys: list[tuple[str, ...]] = [_ANY, ("pod-uid", meta.uid), ("pod-name", meta.name)]
    keys += [("label", k, v) for k, v in meta.labels.items()]
    for ref in meta.owner_references:
        keys += [("owner-uid", ref.uid), ("owner-name", ref.name)]
    return keys
