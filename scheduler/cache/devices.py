"""Device bookkeeping of one node: what its Device CR offers and which pod holds what.

This is the one place device usage is counted, shared by every profile: bound pods (from their
`device-allocated` annotation) and pods reserved in a cycle (DeviceShare's Reserve) are both
`Holding`s, keyed by pod identity, so applying the same holding twice or releasing an unknown
one changes nothing. Policy (which devices to give a pod) lives in the DeviceShare plugin; this
module only adds and subtracts. A Device CR update rebuilds the per-device state and re-applies
every holding, so no allocation is dropped when the inventory changes under running pods.

Two things the scheduler did not decide are tracked here too, so that nothing more is placed on
top of them:

- an **over-committed** device: holdings that together exceed what the Device CR offers, or a
  VF held by two pods. Only something that bypassed the scheduler does that (a pod created with
  `spec.nodeName` and a hand-written annotation, a user's edit); `DeviceState.overcommitted`
  says so, and `NodeDevices.overcommits()` names the holders and the totals.
- a pod whose devices are **unknown**: bound, asking for devices, but with no readable
  `device-allocated` annotation and no earlier valid one to fall back on (after a restart).
  `NodeDevices.unknown_holders(type)` lists such pods; every device of that type on the node
  could be theirs.

`NodeDevices.partitions` is the node's GPU partitions as Koordinator resolves them (the Device's
table and policy, else the built-in table for the Node's model; `apis.extension.partitions`):
the cache sets it whenever the Node or the Device changes, so the allocator reads one value.

Only `ClusterCache` mutates a `NodeDevices`; everyone else reads it during a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.crds.device import Device, DeviceInfo, DeviceType, vf_key
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.extension.partitions import NodePartitions
from apis.k8s.resources import format_quantity

__all__ = ["DeviceHolder", "DeviceState", "DeviceUsage", "Holding", "NodeDevices", "Overcommit", "vf_key"]

_NO_DEVICES: tuple[DeviceState, ...] = ()


@dataclass(frozen=True, slots=True)
class Holding:
    """The devices one pod holds on one node."""

    pod: str  # `namespace/name`, for people
    ident: str  # cache identity (UID)
    allocations: Mapping[DeviceType, tuple[DeviceAllocation, ...]]
    #: Types held with PCIe-level exclusivity: no other pod may use a device of that type on
    #: the same PCIe switch while this holding exists.
    pcie_exclusive: frozenset[DeviceType] = frozenset()


@dataclass(slots=True)
class DeviceState:
    """One device: its inventory entry and what is used of it. Owned by NodeDevices."""

    info: DeviceInfo
    #: What can be allocated: the CR's resources, or nothing when the device is unhealthy.
    total: dict[str, int]
    #: PCIe switch and NUMA node; None when the CR gives no topology (the device then forms a
    #: scope of its own, so no multi-device scope requirement is ever satisfied by guesswork).
    pcie: str | None
    numa: int | None
    used: dict[str, int] = field(default_factory=dict)
    #: pod ident -> resources that pod holds on this device
    holders: dict[str, Mapping[str, int]] = field(default_factory=dict)
    #: vf_key -> pod ident
    used_vfs: dict[str, str] = field(default_factory=dict)
    #: Holdings exceed the Device CR's capacity (healthy or not), or a VF is held twice.
    overcommitted: bool = False

    @property
    def type(self) -> DeviceType:
        return self.info.type

    @property
    def minor(self) -> int:
        return self.info.minor

    @property
    def healthy(self) -> bool:
        return bool(self.total)

    def free(self, name: str) -> int:
        """Unused amount of `name`; never negative (an over-committed device has nothing free)."""
        free = self.total.get(name, 0) - self.used.get(name, 0)
        return free if free > 0 else 0

    def has_vfs(self) -> bool:
        return any(g.vfs for g in self.info.vf_groups)

    @property
    def capacity(self) -> Mapping[str, int]:
        """What the device has, healthy or not: the measure of over-commitment (a pod on a GPU
        that turned unhealthy is not over-committed)."""
        return self.info.resources


@dataclass(frozen=True, slots=True)
class Overcommit:
    """One over-committed device: who holds it and by how much it is exceeded."""

    type: DeviceType
    minor: int
    #: `namespace/name` of every holder, sorted.
    pods: tuple[str, ...]
    #: resource -> (used, capacity), for the resources used beyond capacity.
    exceeded: Mapping[str, tuple[int, int]]
    #: VFs held by more than one pod.
    shared_vfs: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[DeviceType, int, tuple[str, ...]]:
        """What identifies this over-commitment: the device and its holders."""
        return self.type, self.minor, self.pods

    def describe(self) -> str:
        """`gpu 0 is over-committed: gpu-core 150/100, gpu-memory 154Gi/80Gi; held by a/x, b/y`."""
        parts = [
            f"{name.rsplit('/', 1)[-1]} {format_quantity(name, used)}/{format_quantity(name, cap)}"
            for name, (used, cap) in sorted(self.exceeded.items())
        ]
        parts += [f"VF {vf} held twice" for vf in self.shared_vfs]
        return f"{self.type.value} {self.minor} is over-committed: {', '.join(parts)}; held by {', '.join(self.pods)}"


@dataclass(frozen=True, slots=True)
class DeviceHolder:
    pod: str
    resources: Mapping[str, int]
    vfs: tuple[VFAllocation, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceUsage:
    """One device as diagnostics show it: totals, free, used and who holds what."""

    type: DeviceType
    minor: int
    id: str
    healthy: bool
    total: Mapping[str, int]
    free: Mapping[str, int]
    used: Mapping[str, int]
    holders: tuple[DeviceHolder, ...]
    pcie: str | None = None
    numa: int | None = None
    overcommitted: bool = False


class NodeDevices:
    """Devices of one node and their usage. Mutated only through ClusterCache."""

    __slots__ = ("_by_minor", "_by_type", "_exclusive", "_over", "_unknown", "device", "holdings", "partitions")

    def __init__(self) -> None:
        self.device: Device | None = None
        #: The node's GPU partitions (module docstring); None: it has none and honours none.
        self.partitions: NodePartitions | None = None
        self.holdings: dict[str, Holding] = {}
        self._exclusive = 0  # holdings with pcie_exclusive, so the common case skips the scan
        self._by_type: dict[DeviceType, tuple[DeviceState, ...]] = {}
        self._by_minor: dict[tuple[DeviceType, int], DeviceState] = {}
        #: Over-committed devices, so the common case (none) costs nothing to ask.
        self._over: set[tuple[DeviceType, int]] = set()
        #: pod ident -> (pod key, device types it may hold) for pods whose devices are unknown.
        self._unknown: dict[str, tuple[str, frozenset[DeviceType]]] = {}

    # --- reads -----------------------------------------------------------------------------------
    def states(self, dtype: DeviceType) -> tuple[DeviceState, ...]:
        """Devices of a type, in minor order."""
        return self._by_type.get(dtype, _NO_DEVICES)

    def state(self, dtype: DeviceType, minor: int) -> DeviceState | None:
        return self._by_minor.get((dtype, minor))

    def types(self) -> tuple[DeviceType, ...]:
        return tuple(self._by_type)

    def exclusive_pcies(self, dtype: DeviceType, *, besides: str = "") -> set[str]:
        """PCIe switches of `dtype` on which a pod other than `besides` holds devices exclusively."""
        out: set[str] = set()
        for holding in self.holdings.values():
            if holding.ident == besides or dtype not in holding.pcie_exclusive:
                continue
            for alloc in holding.allocations.get(dtype, ()):
                state = self._by_minor.get((dtype, alloc.minor))
                if state is not None and state.pcie is not None:
                    out.add(state.pcie)
        return out

    def has_exclusive_holdings(self) -> bool:
        return self._exclusive > 0

    def usage(self) -> tuple[DeviceUsage, ...]:
        """Every device with totals, free, used and holders, sorted by type then minor."""
        out = []
        for states in self._by_type.values():
            for s in states:
                holders = []
                for ident, res in sorted(s.holders.items(), key=lambda kv: self.holdings[kv[0]].pod):
                    held = self.holdings[ident]
                    vfs = next((a.vfs for a in held.allocations.get(s.type, ()) if a.minor == s.minor), ())
                    holders.append(DeviceHolder(held.pod, dict(res), vfs))
                names_ = sorted(set(s.total) | set(s.used))
                out.append(
                    DeviceUsage(
                        type=s.type,
                        minor=s.minor,
                        id=s.info.id,
                        healthy=s.healthy,
                        total=dict(s.total),
                        free={n: s.free(n) for n in names_},
                        used=dict(s.used),
                        holders=tuple(holders),
                        pcie=s.pcie,
                        numa=s.numa,
                        overcommitted=s.overcommitted,
                    )
                )
        return tuple(sorted(out, key=lambda u: (u.type.value, u.minor)))

    def has_overcommits(self) -> bool:
        return bool(self._over)

    def overcommits(self) -> tuple[Overcommit, ...]:
        """Every over-committed device with its holders and totals, by type then minor."""
        out = []
        for dtype, minor in sorted(self._over, key=lambda k: (k[0].value, k[1])):
            state = self._by_minor[(dtype, minor)]
            capacity = state.capacity
            exceeded = {n: (u, capacity.get(n, 0)) for n, u in state.used.items() if u > capacity.get(n, 0)}
            pods = tuple(sorted(self.holdings[i].pod for i in state.holders))
            out.append(Overcommit(dtype, minor, pods, exceeded, _shared_vfs(state, self.holdings)))
        return tuple(out)

    def unknown_holders(self, dtype: DeviceType) -> tuple[str, ...]:
        """`namespace/name` of pods whose devices are unknown and may include devices of `dtype`."""
        if not self._unknown:
            return ()
        return tuple(sorted(pod for pod, types in self._unknown.values() if dtype in types))

    def has_unknown(self) -> bool:
        return bool(self._unknown)

    def is_unknown(self, ident: str) -> bool:
        return ident in self._unknown

    def copy_without(self, idents: frozenset[str]) -> NodeDevices:
        """A separate copy, as if the pods `idents` held nothing here (preemption's what-if: the
        copy is changed and filtered, the original never)."""
        out = NodeDevices()
        out.set_device(self.device)
        out.partitions = self.partitions
        for ident, holding in self.holdings.items():
            if ident not in idents:
                out.hold(holding)
        out._unknown = {i: u for i, u in self._unknown.items() if i not in idents}
        return out

    # --- writes (ClusterCache only) -----------------------------------------------------------------
    def set_device(self, device: Device | None) -> list[str]:
        """Replace the inventory and re-apply every holding. Returns problems found (for logs)."""
        self.device = device
        by_type: dict[DeviceType, list[DeviceState]] = {}
        for info in device.devices if device is not None else ():
            by_type.setdefault(info.type, []).append(_new_state(info))
        self._by_type = {t: tuple(sorted(states, key=lambda s: s.minor)) for t, states in by_type.items()}
        self._by_minor = {(s.type, s.minor): s for states in self._by_type.values() for s in states}
        self._over.clear()
        problems: list[str] = []
        for holding in self.holdings.values():
            problems += self._apply(holding)
        return problems

    def hold(self, holding: Holding) -> list[str]:
        """Record (or replace) what a pod holds. Returns problems found, such as an unknown minor
        or an over-committed device; the holding is kept either way so nothing is lost."""
        self.release(holding.ident)
        self.holdings[holding.ident] = holding
        if holding.pcie_exclusive:
            self._exclusive += 1
        return self._apply(holding)

    def mark_unknown(self, ident: str, pod: str, types: frozenset[DeviceType]) -> None:
        """The pod holds devices of `types` here, but which is unknown. Replaces what it held."""
        self.release(ident)
        self._unknown[ident] = (pod, types)

    def release(self, ident: str) -> bool:
        """Forget what a pod holds (or that its devices are unknown). Idempotent; returns whether
        it held anything."""
        unknown = self._unknown.pop(ident, None) is not None
        holding = self.holdings.pop(ident, None)
        if holding is None:
            return unknown
        if holding.pcie_exclusive:
            self._exclusive -= 1
        for dtype, allocs in holding.allocations.items():
            for alloc in allocs:
                state = self._by_minor.get((dtype, alloc.minor))
                if state is None or ident not in state.holders:
                    continue
                for name, amount in state.holders.pop(ident).items():
                    left = state.used.get(name, 0) - amount
                    if left:
                        state.used[name] = left
                    else:
                        state.used.pop(name, None)
                self._refresh(state)
        return True

    def _apply(self, holding: Holding) -> list[str]:
        problems = []
        for dtype, allocs in holding.allocations.items():
            for alloc in allocs:
                state = self._by_minor.get((dtype, alloc.minor))
                if state is None:
                    problems.append(f"{dtype.value} {alloc.minor} is not in the Device CR")
                    continue
                state.holders[holding.ident] = alloc.resources
                capacity = state.capacity
                for name, amount in alloc.resources.items():
                    used = state.used[name] = state.used.get(name, 0) + amount
                    if used > capacity.get(name, 0):
                        problems.append(f"{dtype.value} {alloc.minor}: {name} used {used} > {capacity.get(name, 0)}")
                for vf in alloc.vfs:
                    key = vf_key(vf.bus_id, vf.minor)
                    other = state.used_vfs.get(key)
                    if other is not None and other != holding.ident:
                        problems.append(f"{dtype.value} {alloc.minor}: VF {key} also held by another pod")
                self._refresh(state)
        return problems

    def _refresh(self, state: DeviceState) -> None:
        """Recompute the device's VF owners and whether it is over-committed from its holders
        (a VF held twice stays held until both holders let it go)."""
        if state.info.vf_groups:
            owners: dict[str, str] = {}
            for ident in state.holders:
                for alloc in self.holdings[ident].allocations.get(state.type, ()):
                    if alloc.minor == state.minor:
                        owners.update((vf_key(vf.bus_id, vf.minor), ident) for vf in alloc.vfs)
            state.used_vfs = owners
        capacity = state.capacity
        over = any(amount > capacity.get(name, 0) for name, amount in state.used.items())
        over = over or bool(state.info.vf_groups and _shared_vfs(state, self.holdings))
        state.overcommitted = over
        if over:
            self._over.add((state.type, state.minor))
        else:
            self._over.discard((state.type, state.minor))


def _shared_vfs(state: DeviceState, holdings: Mapping[str, Holding]) -> tuple[str, ...]:
    """VFs of the device named by more than one of its holders."""
    seen: dict[str, int] = {}
    for ident in state.holders:
        for alloc in holdings[ident].allocations.get(state.type, ()):
            if alloc.minor == state.minor:
                for key in {vf_key(vf.bus_id, vf.minor) for vf in alloc.vfs}:
                    seen[key] = seen.get(key, 0) + 1
    return tuple(sorted(k for k, n in seen.items() if n > 1))


def _new_state(info: DeviceInfo) -> DeviceState:
    topo = info.topology
    return DeviceState(
        info=info,
        total=dict(info.resources) if info.health else {},
        pcie=topo.pcie_id if topo is not None and topo.pcie_id else None,
        numa=topo.node_id if topo is not None else None,
    )
