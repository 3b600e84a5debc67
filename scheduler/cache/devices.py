"""Device bookkeeping of one node: what its Device CR offers and which pod holds what.

This is the one place device usage is counted, shared by every profile: bound pods (from their
`device-allocated` annotation) and pods reserved in a cycle (DeviceShare's Reserve) are both
`Holding`s, keyed by pod identity, so applying the same holding twice or releasing an unknown
one changes nothing. Policy (which devices to give a pod) lives in the DeviceShare plugin; this
module only adds and subtracts. A Device CR update rebuilds the per-device state and re-applies
every holding, so no allocation is dropped when the inventory changes under running pods.

Only `ClusterCache` mutates a `NodeDevices`; everyone else reads it during a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.crds.device import Device, DeviceInfo, DeviceType
from apis.extension.allocation import DeviceAllocation, VFAllocation

__all__ = ["DeviceHolder", "DeviceState", "DeviceUsage", "Holding", "NodeDevices", "vf_key"]

_NO_DEVICES: tuple[DeviceState, ...] = ()


def vf_key(bus_id: str, minor: int) -> str:
    """How a virtual function is identified: its PCI address, or its minor when it has none."""
    return bus_id or f"minor:{minor}"


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


class NodeDevices:
    """Devices of one node and their usage. Mutated only through ClusterCache."""

    __slots__ = ("_by_minor", "_by_type", "_exclusive", "device", "holdings")

    def __init__(self) -> None:
        self.device: Device | None = None
        self.holdings: dict[str, Holding] = {}
        self._exclusive = 0  # holdings with pcie_exclusive, so the common case skips the scan
        self._by_type: dict[DeviceType, tuple[DeviceState, ...]] = {}
        self._by_minor: dict[tuple[DeviceType, int], DeviceState] = {}

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
                    )
                )
        return tuple(sorted(out, key=lambda u: (u.type.value, u.minor)))

    # --- writes (ClusterCache only) -----------------------------------------------------------------
    def set_device(self, device: Device | None) -> list[str]:
        """Replace the inventory and re-apply every holding. Returns problems found (for logs)."""
        self.device = device
        by_type: dict[DeviceType, list[DeviceState]] = {}
        for info in device.devices if device is not None else ():
            by_type.setdefault(info.type, []).append(_new_state(info))
        self._by_type = {t: tuple(sorted(states, key=lambda s: s.minor)) for t, states in by_type.items()}
        self._by_minor = {(s.type, s.minor): s for states in self._by_type.values() for s in states}
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

    def release(self, ident: str) -> bool:
        """Forget what a pod holds. Idempotent; returns whether it held anything."""
        holding = self.holdings.pop(ident, None)
        if holding is None:
            return False
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
                for key in [k for k, owner in state.used_vfs.items() if owner == ident]:
                    del state.used_vfs[key]
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
                for name, amount in alloc.resources.items():
                    state.used[name] = state.used.get(name, 0) + amount
                    if state.used[name] > state.total.get(name, 0):
                        problems.append(
                            f"{dtype.value} {alloc.minor}: {name} used {state.used[name]} > {state.total.get(name, 0)}"
                        )
                for vf in alloc.vfs:
                    key = vf_key(vf.bus_id, vf.minor)
                    other = state.used_vfs.get(key)
                    if other is not None and other != holding.ident:
                        problems.append(f"{dtype.value} {alloc.minor}: VF {key} also held by another pod")
                    state.used_vfs[key] = holding.ident
        return problems


def _new_state(info: DeviceInfo) -> DeviceState:
    topo = info.topology
    return DeviceState(
        info=info,
        total=dict(info.resources) if info.health else {},
        pcie=topo.pcie_id if topo is not None and topo.pcie_id else None,
        numa=topo.node_id if topo is not None else None,
    )
