"""Reservations as the cache sees them: which are held on which node, what they have left, and
which owner consumed which.

An Available Reservation (`apis.crds.reservation`) is counted on its node as a pod — its
`reserve_pod()`, with the devices its `device-allocated` annotation names — so every pod that is
not its owner finds those resources used, with no plugin knowing about Reservations. The owners
are told apart here: `ReservationBook` keeps the held Reservations per node and answers, for a
pod being scheduled, which Reservations it may use on each node (`HeldReservation`).

A pod placed onto a Reservation consumes it, and counts itself. An `allocateOnce` Reservation
then stops being counted, for good (the rest of what it held is free). One that is not keeps
being counted as what it has left (`remaining`): what it reserves minus what its owners'
requests take of it (`Reservation.allocated_by`), and of each reserved device what the owners
hold of it; so the owners and the remainder together never count more than it reserved, and
what an owner left stays out of every non-owner's reach. Consumption is remembered per pod, so
that the Reservation's own updates never count an owner twice, and a restart that sees the
pod's `reservation-allocated` annotation before or after the Reservation comes to the same
state.

A Reservation placed over running pods (pre-allocation: `Reservation.pre_allocated`) has them as
consumers too, counted the same way — they count themselves, it counts what it reserves minus
what they take, devices included — but they never consume an allocateOnce one: it stays held
(what they take subtracted) until an owner comes, and when they go it has back what they had.

Pure bookkeeping, driven by `ClusterCache` under its contract (one thread, no I/O).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from apis.crds.device import DeviceType
from apis.crds.reservation import Reservation
from apis.extension import devicetypes
from apis.extension.allocation import DeviceAllocation
from scheduler.cache.devices import vf_key
from scheduler.cache.podinfo import PodInfo

__all__ = ["Devices", "HeldReservation", "ReservationBook", "remaining_devices"]

#: Device type -> devices (with the resources of each), as a `device-allocated` annotation says.
Devices = Mapping[DeviceType, tuple[DeviceAllocation, ...]]


@dataclass(frozen=True, slots=True)
class HeldReservation:
    """A Reservation whose resources are set aside on `node` for its owners."""

    reservation: Reservation
    #: What it has left, as the cache counts it on the node: the reserve pod with the remaining
    #: requests and the remaining devices.
    pod: PodInfo
    #: Every device it reserved (its `device-allocated` annotation), owners' shares included.
    reserved: Devices = field(default_factory=dict)
    #: What its owners take of it (`Reservation.allocated_by`), and how many they are.
    allocated: Mapping[str, int] = field(default_factory=dict)
    owners: int = 0

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
    def allocations(self) -> Devices:
        """The devices it has left (what a next owner may take of them)."""
        return self.pod.allocations

    @property
    def remaining(self) -> Mapping[str, int]:
        return self.pod.requests

    def devices_fit(self, pod: PodInfo) -> bool:
        """Whether the devices it has left are exactly what `pod` asks for (same device
        resources), so the pod can be given them as they are: the reserved GPUs, the share."""
        if not self.allocations:
            return False
        return all(pod.requests.get(n, 0) == self.pod.requests.get(n, 0) for n in devicetypes.RESOURCE_NAMES)


def remaining_devices(reserved: Devices, taken: Iterable[Devices]) -> dict[DeviceType, tuple[DeviceAllocation, ...]]:
    """Of the `reserved` devices, what the holdings `taken` (its owners') leave: per device, each
    resource minus what they hold of that device (never below zero) and the VFs they do not
    hold; a device with nothing left is gone."""
    used: dict[tuple[DeviceType, int], dict[str, int]] = {}
    used_vfs: dict[tuple[DeviceType, int], set[str]] = {}
    for holding in taken:
        for dtype, allocs in holding.items():
            for alloc in allocs:
                into = used.setdefault((dtype, alloc.minor), {})
                for name, amount in alloc.resources.items():
                    into[name] = into.get(name, 0) + amount
                used_vfs.setdefault((dtype, alloc.minor), set()).update(vf_key(v.bus_id, v.minor) for v in alloc.vfs)
    out: dict[DeviceType, tuple[DeviceAllocation, ...]] = {}
    for dtype, allocs in reserved.items():
        left = []
        for alloc in allocs:
            took = used.get((dtype, alloc.minor), {})
            gone = used_vfs.get((dtype, alloc.minor), set())
            amounts = {n: a - took.get(n, 0) for n, a in alloc.resources.items() if a > took.get(n, 0)}
            vfs = tuple(v for v in alloc.vfs if vf_key(v.bus_id, v.minor) not in gone)
            if amounts or vfs:
                left.append(DeviceAllocation(alloc.minor, amounts, alloc.id, vfs))
        if left:
            out[dtype] = tuple(left)
    return out


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

    def knows(self, key: str) -> bool:
        """Whether a Reservation of this UID (or name, as a pod's annotation may give it) is known."""
        return key in self.known or any(r.name == key for r in self.known.values())

    def consumers_of(self, reservation: Reservation) -> set[str]:
        """The pods (idents) that consumed it, named by UID or by name."""
        return self.consumers.get(reservation.uid, set()) | self.consumers.get(reservation.name, set())

    def shared(self, uid: str | None, pod: str = "") -> Reservation | None:
        """The known Reservation `uid` when `pod` (an ident) shares it with others: owners share
        one that is not allocateOnce, and pods it was placed over share any. Else None."""
        if uid is None:
            return None
        reservation = self.known.get(uid)
        if reservation is None:  # named by a pod's annotation without a UID (rare)
            reservation = next((r for r in self.known.values() if r.name == uid), None)
        if reservation is None:
            return None
        return reservation if not reservation.allocate_once or pod in reservation.pre_allocated_uids() else None

    def is_consumed(self, reservation: Reservation) -> bool:
        """Whether an allocateOnce Reservation was consumed (it then holds nothing, for good): an
        owner other than the pods it was placed over uses it."""
        if not reservation.allocate_once:
            return False
        pre = reservation.pre_allocated_uids()
        return any(o.uid not in pre for o in reservation.current_owners) or any(
            p not in pre for p in self.consumers_of(reservation)
        )

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

    def for_pod(
        self, pod: PodInfo, accept: Callable[[HeldReservation], bool] | None = None
    ) -> dict[str, list[HeldReservation]]:
        """Per node, the held Reservations `pod` may use there (its owners match, `accept` takes
        them), by name; empty for a reserve pod itself or a pod that opts out."""
        if not self.held or pod.ident in self.known:
            return {}
        candidates: set[str] = set()
        for key in _pod_keys(pod):
            candidates.update(self.by_key.get(key, ()))
        out: dict[str, list[HeldReservation]] = {}
        for uid in candidates:
            held = self.held[self.node_of[uid]][uid]
            if held.reservation.matches_owner(pod.pod) and (accept is None or accept(held)):
                out.setdefault(held.node, []).append(held)
        for found in out.values():
            found.sort(key=lambda h: h.name)
        return out

    def consume(self, uid: str, pod: str) -> None:
        """`pod` consumed the Reservation `uid` (and no other it may have consumed before)."""
        self.give_back(pod)
        self.consumers.setdefault(uid, set()).add(pod)
        self.consumed_by[pod] = uid

    def give_back(self, pod: str) -> str | None:
        """The pod no longer uses what it consumed; the Reservation's UID (or name) it had."""
        uid = self.consumed_by.pop(pod, None)
        if uid is None:
            return None
        pods = self.consumers.get(uid)
        if pods is not None:
            pods.discard(pod)
            if not pods:
                del self.consumers[uid]
        return uid

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
