"""The scheduler's cluster cache: Nodes, assigned Pods and Device CRs, plus in-flight pods.

Fed by explicit calls — from informers in the live scheduler, from a YAML snapshot in
`tessera what-if`, from a trace in `tessera simulate` — so the scheduling core never does I/O.
Mutations are methods (add/update/remove a node, pod or Device; assume/forget a pod being
scheduled; reserve/release its devices); reads return live `NodeInfo`s.

Contract: the cache is not thread-safe. Whoever drives it calls every method from one thread
(or under one lock), and no mutation happens while a scheduling cycle reads it. Pure and
deterministic: no clock of its own (callers pass `now`), no I/O, no threads.

Assumed pods follow kube-scheduler: `assume` puts a pod being scheduled on its node before
binding; when the informer later delivers the bound pod, `add_pod` confirms it; `forget` undoes
an assumption whose binding failed; an assumption whose binding finished but was never
confirmed expires after `assumed_ttl` (`cleanup_expired`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from apis.crds.device import Device, DeviceType
from apis.crds.reservation import Reservation, allocated_from_pod
from apis.errors import AnnotationError
from apis.extension import partitions
from apis.extension.allocation import DeviceAllocation
from apis.k8s.core import Node, Pod
from scheduler.cache.budgets import DisruptionBudgets
from scheduler.cache.devices import DeviceUsage, Holding, Overcommit
from scheduler.cache.holdings import MISSING, REMOVED, Holdings
from scheduler.cache.nodeinfo import NodeInfo
from scheduler.cache.nominator import Nominator
from scheduler.cache.podinfo import PodInfo
from scheduler.cache.reservations import HeldReservation, ReservationBook, remaining_devices
from scheduler.cache.templates import SharedResourceTemplates

__all__ = ["DEFAULT_ASSUMED_TTL", "ClusterCache"]

log = logging.getLogger(__name__)

#: Seconds an assumed pod whose binding finished may wait for the informer's confirmation.
DEFAULT_ASSUMED_TTL = 30.0
_CHANGE_LOG_LIMIT = 1 << 16


@dataclass(slots=True)
class _PodEntry:
    info: PodInfo
    node: str
    assumed: bool
    deadline: float | None = None  # set by finish_binding for assumed pods


class ClusterCache:
    """Nodes, assigned pods and devices, with incremental sums. See the module docstring."""

    def __init__(self, *, assumed_ttl: float = DEFAULT_ASSUMED_TTL, holdings: Holdings | None = None) -> None:
        self._assumed_ttl = assumed_ttl
        #: Where a bound pod's devices are read from (`holdings.py`): the `device-allocated`
        #: annotation unless sources are given or added.
        self.holdings = holdings if holdings is not None else Holdings()
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, _PodEntry] = {}
        #: Devices reserved for pods in flight (assumed, not yet confirmed with an annotation).
        self._reserved: dict[str, tuple[str, Holding]] = {}
        self._generation = 0
        self._static_generation = 0
        self._node_list: list[NodeInfo] | None = None
        self._positions: dict[str, int] | None = None
        self._change_log: list[str] = []
        self._change_base = 0
        #: How many nodes are cordoned, and how many carry a taint of each effect: lets a
        #: plugin skip work that cannot reject anything in this cluster.
        self._cordoned = 0
        self._taint_effects: dict[str, int] = {}
        #: Pods nominated to nodes by preemption; a pod placed or deleted is no longer nominated.
        self.nominator = Nominator()
        #: Reservations: held per node, and consumed by their owners (see `reservations.py`).
        self._book = ReservationBook()
        #: PodDisruptionBudgets, for preemption (kube's DefaultPreemption honours them).
        self.budgets = DisruptionBudgets()
        #: GPU shared-resource templates (DeviceShare), from the ConfigMaps its arguments name.
        self.templates = SharedResourceTemplates()

    # --- reads ------------------------------------------------------------------------------------
    def node(self, name: str) -> NodeInfo | None:
        """The NodeInfo of a node that has a Node object, else None."""
        info = self._nodes.get(name)
        return info if info is not None and info.node is not None else None

    def nodes(self) -> Sequence[NodeInfo]:
        """Nodes with a Node object, sorted by name (a stable order for rotation and ties)."""
        if self._node_list is None:
            self._node_list = [self._nodes[n] for n in sorted(self._nodes) if self._nodes[n].node is not None]
        return self._node_list

    def positions(self) -> Mapping[str, int]:
        """Node name -> index in `nodes()`."""
        if self._positions is None:
            self._positions = {info.name: i for i, info in enumerate(self.nodes())}
        return self._positions

    def pod_node(self, ident: str) -> str | None:
        entry = self._pods.get(ident)
        return entry.node if entry is not None else None

    def pod_info(self, ident: str) -> PodInfo | None:
        """The PodInfo of a bound or assumed pod (its parsed allocation, or why it did not parse)."""
        entry = self._pods.get(ident)
        return entry.info if entry is not None else None

    def devices_unknown(self, ident: str) -> bool:
        """Whether a bound pod asks for devices but which it holds is unknown (see `add_pod`)."""
        entry = self._pods.get(ident)
        info = self._nodes.get(entry.node) if entry is not None else None
        return info is not None and info.devices.is_unknown(ident)

    def is_assumed(self, ident: str) -> bool:
        entry = self._pods.get(ident)
        return entry is not None and entry.assumed

    def pods(self) -> Sequence[PodInfo]:
        """Every bound or assumed pod, in no particular order."""
        return [entry.info for entry in self._pods.values()]

    @property
    def cordoned_nodes(self) -> int:
        """Nodes with `spec.unschedulable: true`."""
        return self._cordoned

    def tainted_nodes(self, effect: str) -> int:
        """Nodes with at least one taint of this effect."""
        return self._taint_effects.get(effect, 0)

    @property
    def generation(self) -> int:
        """Changes on every write to any node (its Node, pods or devices): a memo of sums over
        the whole cluster keyed by it is never stale."""
        return self._generation

    @property
    def static_generation(self) -> int:
        """Changes whenever a Node object is added, updated or removed (labels, taints, ...)."""
        return self._static_generation

    def changes_since(self, cursor: int) -> tuple[int, tuple[str, ...] | None]:
        """Names of nodes changed since `cursor`, and the new cursor.

        Lets a plugin keep an index in step with the cache by looking only at what changed.
        Returns None instead of names when the cursor is too old (resync everything).
        """
        end = self._change_base + len(self._change_log)
        if cursor < self._change_base:
            return end, None
        return end, tuple(dict.fromkeys(self._change_log[cursor - self._change_base :]))

    def overcommits(self, node: str) -> tuple[Overcommit, ...]:
        """The node's over-committed devices, with holders and totals (see `NodeDevices`)."""
        info = self._nodes.get(node)
        return info.devices.overcommits() if info is not None and info.devices.has_overcommits() else ()

    def overcommitted_devices(self) -> dict[str, int]:
        """node -> how many of its devices are over-committed (only nodes with some)."""
        return {
            name: len(info.devices.overcommits())
            for name, info in self._nodes.items()
            if info.devices.has_overcommits()
        }

    def device_usage(self, node: str) -> tuple[DeviceUsage, ...]:
        """Per device: total, free, used and holders (empty for an unknown node)."""
        info = self._nodes.get(node)
        return info.devices.usage() if info is not None else ()

    # --- nodes ------------------------------------------------------------------------------------
    def add_node(self, node: Node) -> None:
        """Add or replace a Node object. Idempotent."""
        info = self._node_info(node.name)
        if info.node is None:
            self._node_list = self._positions = None
        else:
            self._count_node(info.node, -1)
        info.node = node
        self._count_node(node, 1)
        self._static_generation += 1
        self._touch(info, devices=self._resolve_partitions(info))

    update_node = add_node

    def remove_node(self, name: str) -> None:
        """Remove a Node object. Its pods and Device CR stay until removed themselves."""
        info = self._nodes.get(name)
        if info is None or info.node is None:
            return
        self._count_node(info.node, -1)
        info.node = None
        self._node_list = self._positions = None
        self._static_generation += 1
        self._touch(info, devices=self._resolve_partitions(info))
        self._drop_if_empty(info)

    # --- devices ----------------------------------------------------------------------------------
    def add_device(self, device: Device) -> None:
        """Add or replace a node's Device CR; every holding on the node is re-applied."""
        info = self._node_info(device.node_name)
        self._log_problems(info.name, "", info.devices.set_device(device))
        self._resolve_partitions(info)
        self._touch(info, devices=True)

    update_device = add_device

    def remove_device(self, name: str) -> None:
        info = self._nodes.get(name)
        if info is None or info.devices.device is None:
            return
        info.devices.set_device(None)
        self._resolve_partitions(info)
        self._touch(info, devices=True)
        self._drop_if_empty(info)

    # --- pods from informers -----------------------------------------------------------------------
    def add_pod(self, pod: Pod) -> None:
        """Add, update or confirm an assigned pod. Pods without a node, or terminal, are removed.

        A bound pod's devices are what its records say (`self.holdings`: the `device-allocated`
        annotation by default). When an update makes a record unreadable, or removes it, the
        pod still runs on the devices it had: the last valid allocation stays counted, and the
        kept PodInfo says why in `allocation_error`. A pod asking for devices that has no
        readable record and no earlier one (first seen that way, e.g. after a restart) holds
        unknown devices (`NodeDevices.unknown_holders`) until the record is fixed or the pod goes.
        """
        ident = pod.uid or pod.key
        if not pod.node_name or pod.is_terminal:
            self._remove(ident)
            self._give_back(ident)
            return
        self.nominator.forget(ident)
        uid = self._consume_from_annotation(pod, ident)
        shared = self._book.shared(uid, ident) is not None
        if shared and uid is not None:
            self._uncount(uid)  # off first, so the owner's devices never meet what it had left
        self._put(self.holdings.info(pod))
        if uid is not None:
            self._recount(uid)

    update_pod = add_pod

    def refresh_holdings(self, ident: str) -> None:
        """A holdings source's record of the bound pod `ident` changed, not the pod itself (a
        source whose record lives in another object): count the pod again. Idempotent; a pod
        that is not bound (assumed, or unknown) is left alone."""
        entry = self._pods.get(ident)
        if entry is not None and not entry.assumed:
            self.add_pod(entry.info.pod)

    def _put(self, info: PodInfo) -> None:
        """Count a bound pod (see `add_pod`) on its node, replacing what was counted for it."""
        pod, ident = info.pod, info.ident
        entry = self._pods.get(ident)
        counted: Holding | None = None
        confirming = False
        if entry is not None:
            if entry.node == pod.node_name:
                counted = self._nodes[entry.node].devices.holdings.get(ident)
                confirming = entry.assumed
            self._take_off_node(entry, keep_reservation=entry.node == pod.node_name)
        node = self._node_info(pod.node_name)
        info = self._account(node, info, counted, confirming=confirming)
        node.add_pod(info)
        self._pods[ident] = _PodEntry(info, pod.node_name, assumed=False)
        self._touch(node, devices=True)

    def remove_pod(self, pod: Pod) -> None:
        """Remove a pod (deleted, or finished). Idempotent."""
        self._remove(pod.uid or pod.key)
        self._give_back(pod.uid or pod.key)
        self.nominator.forget(pod.uid or pod.key)

    # --- reservations -----------------------------------------------------------------------------
    def add_reservation(self, reservation: Reservation) -> None:
        """Add or update a Reservation. Idempotent.

        An Available (or Waiting) Reservation with a node is counted there as what it has left
        for its owners (`_recount`; all of it before an owner comes), its devices from its
        records (its reserve pod's, `self.holdings`), confirming the assumption made while it
        was being scheduled. A terminal or deleting one is removed (`remove_reservation`). A pending one
        is only remembered: its reserve pod is not an owner of any other Reservation.
        """
        uid = reservation.uid
        if reservation.phase.terminal or reservation.meta.deletion_timestamp:
            self.remove_reservation(uid)
            return
        self._book.known[uid] = reservation
        self._recount(uid)

    update_reservation = add_reservation

    def remove_reservation(self, uid: str) -> None:
        """The Reservation is deleted or terminal: what it held is free. Idempotent."""
        self._uncount(uid)
        self._book.forget(uid)

    def reservation(self, uid: str) -> Reservation | None:
        """A known, non-terminal Reservation by UID."""
        return self._book.known.get(uid)

    def is_reservation(self, ident: str) -> bool:
        """Whether `ident` is a (non-terminal) Reservation's UID: its reserve pod's identity."""
        return ident in self._book.known

    def reservations_for(
        self, pod: PodInfo, accept: Callable[[HeldReservation], bool] | None = None
    ) -> dict[str, list[HeldReservation]]:
        """Per node, the held Reservations `pod` may be placed onto (see `ReservationBook.for_pod`)."""
        return self._book.for_pod(pod, accept)

    def reservations_on(self, node: str) -> list[HeldReservation]:
        """The Reservations held on `node`, by name."""
        return sorted(self._book.on_node(node), key=lambda h: h.name)

    def held_reservations(self) -> list[HeldReservation]:
        return self._book.all_held()

    def known_reservations(self) -> list[Reservation]:
        """Every non-terminal Reservation the cache knows, held or not (a copy restores them)."""
        return list(self._book.known.values())

    def consumed_reservation(self, pod: str) -> str | None:
        """The Reservation (UID, or name) the pod `pod` (an ident) was placed onto, if any."""
        return self._book.consumed_by.get(pod)

    def consume_reservation(self, uid: str, pod: str) -> None:
        """`pod` (an ident) is placed onto the Reservation: it counts itself, and the Reservation
        what it has left (nothing, once consumed, for an allocateOnce one). Idempotent; undone by
        `restore_reservation`."""
        self._book.consume(uid, pod)
        self._recount(uid)

    def restore_reservation(self, pod: str) -> None:
        """Undo `consume_reservation` (the pod's cycle failed, or the pod is gone): the
        Reservation has back what the pod took (an allocateOnce one is held again when it is
        still Available and nobody else consumed it). Idempotent."""
        uid = self._book.give_back(pod)
        if uid is not None:
            self._recount(uid)

    def _recount(self, uid: str) -> None:
        """Count the Reservation `uid` (or named so) on its node as what it has left for its
        owners, or not at all (pending, terminal, or an allocateOnce one consumed)."""
        book = self._book
        reservation = book.known.get(uid) or next((r for r in book.known.values() if r.name == uid), None)
        if reservation is None:
            self._uncount(uid)
            return
        uid = reservation.uid
        if not reservation.node_name or not reservation.phase.holds_resources or book.is_consumed(reservation):
            self._uncount(uid)
            return
        full = self.holdings.info(reservation.reserve_pod())
        owners = [
            e
            for e in (self._pods.get(i) for i in sorted(book.consumers_of(reservation)))
            if e is not None and e.node == reservation.node_name
        ]
        holdings = self._nodes[reservation.node_name].devices.holdings if reservation.node_name in self._nodes else {}
        taken = [holdings[e.info.ident].allocations for e in owners if e.info.ident in holdings]
        allocated = reservation.allocated_by(e.info.requests for e in owners)
        left = PodInfo(
            full.pod,
            reservation.remaining(allocated),
            remaining_devices(full.allocations, taken),
            full.allocation_error,
            full.pcie_exclusive,
        )
        self._uncount(uid)  # what it had left before is not what it has left now: no fallback to it
        self._remove(uid)  # nor to what its cycle reserved while it was being placed
        self._put(left)
        info = self.pod_info(uid)
        if info is not None:
            book.hold(HeldReservation(reservation, info, full.allocations, allocated, len(owners)))

    def _uncount(self, uid: str) -> None:
        """Stop counting the Reservation `uid` on its node (its reserve pod), if it was."""
        if self._book.unhold(uid) is not None:
            self._remove(uid)

    # --- pods being scheduled ---------------------------------------------------------------------
    def assume(self, pod: PodInfo, node: str) -> None:
        """Put a pod being scheduled on `node` before it is bound. Raises ValueError if the pod
        is already in the cache (a caller bug: it would be counted twice)."""
        if pod.ident in self._pods:
            raise ValueError(f"pod {pod.key} is already in the scheduler cache")
        self.nominator.forget(pod.ident)
        info = self._node_info(node)
        info.add_pod(pod)
        self._pods[pod.ident] = _PodEntry(pod, node, assumed=True)
        self._touch(info)

    def confirm(self, pod: Pod) -> None:
        """An assumed pod is bound as `pod` (its node set, annotations patched); nothing moves.

        For callers that bind in memory (what-if, the simulator): it keeps the devices reserved
        for the pod instead of decoding the annotation PreBind wrote from that same reservation.
        A pod that is not assumed on `pod.node_name` is added as `add_pod` would.
        """
        ident = pod.uid or pod.key
        entry = self._pods.get(ident)
        reserved = self._reserved.get(ident)
        if entry is None or not entry.assumed or entry.node != pod.node_name:
            self.add_pod(pod)
            return
        uid = self._consume_from_annotation(pod, ident)
        if self._book.shared(uid, ident) is not None and uid is not None:
            self._uncount(uid)
        holding = reserved[1] if reserved is not None and reserved[0] == entry.node else None
        info = PodInfo(
            pod,
            entry.info.requests,
            holding.allocations if holding is not None else {},
            pcie_exclusive=holding.pcie_exclusive if holding is not None else frozenset(),
        )
        node = self._nodes[entry.node]
        node.pods[ident] = info
        self._pods[ident] = _PodEntry(info, entry.node, assumed=False)
        self._reserved.pop(ident, None)
        self._touch(node)
        if uid is not None:
            self._recount(uid)

    def forget(self, ident: str) -> None:
        """Undo `assume` (binding failed or the cycle was aborted). Idempotent; a confirmed pod
        is left alone."""
        entry = self._pods.get(ident)
        if entry is None or not entry.assumed:
            return
        self._remove(ident)

    def finish_binding(self, ident: str, *, now: float) -> None:
        """The binding of an assumed pod was sent; start its expiry clock."""
        entry = self._pods.get(ident)
        if entry is not None and entry.assumed:
            entry.deadline = now + self._assumed_ttl

    def cleanup_expired(self, *, now: float) -> list[str]:
        """Forget assumed pods whose binding finished long ago but never got confirmed."""
        expired = [i for i, e in self._pods.items() if e.assumed and e.deadline is not None and e.deadline <= now]
        for ident in expired:
            log.warning("Assumed pod expired", extra={"pod": self._pods[ident].info.key})
            self._remove(ident)
        return expired

    def reserve_devices(
        self,
        pod: PodInfo,
        node: str,
        allocations: Mapping[DeviceType, tuple[DeviceAllocation, ...]],
        *,
        pcie_exclusive: frozenset[DeviceType] = frozenset(),
    ) -> None:
        """Record devices chosen for a pod in flight (DeviceShare's Reserve). Idempotent. A pod
        placed onto a Reservation its owners share takes them from what the Reservation has left."""
        uid = self._shared_by(pod.ident)
        if uid is not None:
            self._uncount(uid)
        holding = Holding(pod.key, pod.ident, allocations, pcie_exclusive)
        self._reserved[pod.ident] = (node, holding)
        info = self._node_info(node)
        self._log_problems(node, pod.key, info.devices.hold(holding))
        self._touch(info, devices=True)
        if uid is not None:
            self._recount(uid)

    def release_devices(self, ident: str, node: str) -> None:
        """Undo `reserve_devices` (Unreserve). Idempotent. A pod confirmed meanwhile (bound, as
        the API says) keeps what it holds: that is no longer the cycle's to give back."""
        reserved = self._reserved.get(ident)
        if reserved is not None and reserved[0] == node:
            del self._reserved[ident]
        entry = self._pods.get(ident)
        if entry is not None and not entry.assumed:
            return
        info = self._nodes.get(node)
        if info is not None and info.devices.release(ident):
            self._touch(info, devices=True)
            uid = self._shared_by(ident)
            if uid is not None:
                self._recount(uid)

    # --- internals --------------------------------------------------------------------------------
    def _consume_from_annotation(self, pod: Pod, ident: str) -> str | None:
        """A bound pod that says it was placed onto a Reservation consumed it (also after a
        restart, whichever of the two the informers deliver first): the Reservation's UID (or
        name), recorded; the caller counts the Reservation again once the pod is counted."""
        try:
            allocated = allocated_from_pod(pod)
        except AnnotationError as e:
            log.warning("Ignoring malformed reservation annotation", extra={"pod": pod.key, "error": str(e)})
            return self._book.consumed_by.get(ident)
        if allocated is None:
            return self._book.consumed_by.get(ident)
        uid = self._book.uid_of(allocated.name, allocated.uid)
        if self._book.consumed_by.get(ident) != uid:
            self._book.consume(uid, ident)
        return uid

    def _shared_by(self, ident: str) -> str | None:
        """The UID of the Reservation the pod `ident` consumed and shares with others (see
        `ReservationBook.shared`), if any."""
        reservation = self._book.shared(self._book.consumed_by.get(ident), ident)
        return reservation.uid if reservation is not None else None

    def _give_back(self, ident: str) -> None:
        """A pod that consumed a Reservation is gone: one its owners share, or one placed over the
        pod, has back what the pod took (an allocateOnce one stays consumed until it ends); one
        the cache does not know (it ended) keeps no record of the pod."""
        uid = self._book.consumed_by.get(ident)
        if uid is None:
            return
        if self._shared_by(ident) is not None:
            self.restore_reservation(ident)
        elif not self._book.knows(uid):
            self._book.give_back(ident)

    def _node_info(self, name: str) -> NodeInfo:
        info = self._nodes.get(name)
        if info is None:
            info = self._nodes[name] = NodeInfo(name)
            self._touch(info, devices=True)  # fresh generations: no memo may mistake it for an old one
        return info

    @staticmethod
    def _resolve_partitions(info: NodeInfo) -> bool:
        """Set the node's GPU partitions from its Device and Node; whether they changed (a
        change is a device change: what the allocator may give differs)."""
        device = info.devices.device
        found = partitions.resolve(
            device.gpu_partitions if device is not None else None,
            device.meta.labels if device is not None else {},
            info.node.labels if info.node is not None else {},
        )
        if found == info.devices.partitions:
            return False
        info.devices.partitions = found
        return True

    def _touch(self, info: NodeInfo, *, devices: bool = False) -> None:
        self._generation += 1
        info.generation = self._generation
        if devices:
            info.device_generation = self._generation
        self._change_log.append(info.name)
        if len(self._change_log) > _CHANGE_LOG_LIMIT:
            half = len(self._change_log) // 2
            del self._change_log[:half]
            self._change_base += half

    def _count_node(self, node: Node, sign: int) -> None:
        if node.unschedulable:
            self._cordoned += sign
        for effect in {t.effect for t in node.taints}:
            self._taint_effects[effect] = self._taint_effects.get(effect, 0) + sign

    def _account(self, node: NodeInfo, info: PodInfo, counted: Holding | None, *, confirming: bool) -> PodInfo:
        """Count the devices of a bound pod on `node` (see `add_pod`); the PodInfo to keep.

        `counted` is what the pod was counted for on this node before this version (its last
        valid allocation, or what Reserve recorded while it was being bound: `confirming`).
        """
        self._reserved.pop(info.ident, None)
        if info.allocations:
            holding = Holding(info.key, info.ident, info.allocations, info.pcie_exclusive)
            self._log_problems(node.name, info.key, node.devices.hold(holding))
            return info
        if counted is not None and counted.allocations:
            error = info.allocation_error
            if not error and not confirming:
                error = self.holdings.problem(info, REMOVED)
            self._log_problems(node.name, info.key, node.devices.hold(counted))
            if error:
                log.warning("Keeping the last valid device allocation", extra={"pod": info.key, "error": error})
            return dataclasses.replace(
                info, allocations=counted.allocations, allocation_error=error, pcie_exclusive=counted.pcie_exclusive
            )
        types = self.holdings.expected(info)[0]
        if types:
            error = info.allocation_error or self.holdings.problem(info, MISSING)
            node.devices.mark_unknown(info.ident, info.key, types)
            log.warning(
                "Devices of a bound pod are unknown",
                extra={"pod": info.key, "node": node.name, "types": ",".join(sorted(t.value for t in types))},
            )
            return dataclasses.replace(info, allocation_error=error)
        return info

    def _take_off_node(self, entry: _PodEntry, *, keep_reservation: bool) -> None:
        node = self._nodes.get(entry.node)
        if node is None:
            return
        node.remove_pod(entry.info.ident)
        node.devices.release(entry.info.ident)
        if not keep_reservation:
            self._reserved.pop(entry.info.ident, None)
        self._touch(node, devices=True)
        self._drop_if_empty(node)

    def _remove(self, ident: str) -> None:
        entry = self._pods.pop(ident, None)
        if entry is not None:
            self._take_off_node(entry, keep_reservation=False)
            uid = self._shared_by(ident)
            if uid is not None:
                self._recount(uid)  # what the owner held here is the Reservation's again
        else:
            self._reserved.pop(ident, None)

    def _drop_if_empty(self, info: NodeInfo) -> None:
        if info.is_empty():
            del self._nodes[info.name]

    @staticmethod
    def _log_problems(node: str, pod: str, problems: list[str]) -> None:
        for problem in problems:
            log.warning("Device accounting problem", extra={"node": node, "pod": pod, "problem": problem})
