"""DeviceShare's memory: results per request shape and node, and an index of free GPUs.

The cluster cache (`scheduler.cache`) holds the device bookkeeping itself; this module keeps
what DeviceShare derives from it, so a cycle does little work per node:

- `FitMemo`: the allocation (or rejection) and score of a request shape on a node, valid while
  the node's `device_generation` is unchanged. Pods asking for the same thing — most of them —
  reuse it on every node that did not change since, i.e. all but the one the last pod went to.
- `Signatures` + `SharedFits`: what the allocator sees of a node (NVLink and GPU partitions
  included), minus identities (device IDs, VF addresses), as a small id. Nodes built alike and
  used alike — at first, all of them — share one allocation decision per request shape,
  translated back to each node's own devices
  (`relative`/`materialize`), so a new request shape costs one allocation, not one per node.
- `GPUFreeIndex`: nodes bucketed by how many GPUs are entirely unused and by the most
  `gpu-memory-ratio` free on one GPU, kept in step through the cache's change feed. PreFilter
  asks it for the nodes that might fit (a superset: Filter still decides), so a nearly full
  cluster is not scanned node by node.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from apis.crds.device import Device, DeviceType
from apis.extension import names
from apis.extension.allocation import DeviceAllocation, VFAllocation
from scheduler.cache import ClusterCache, NodeDevices, NodeInfo
from scheduler.cache.devices import vf_key
from scheduler.framework.ids import Ids
from scheduler.framework.status import Status
from scheduler.plugins.deviceshare.allocator import Allocation, PodDeviceRequest

__all__ = ["FitMemo", "GPUFreeIndex", "NodeFit", "SharedFit", "SharedFits", "Signatures"]

_SHAPES_PER_NODE = 64
_MAX_SIGNATURES = 1 << 16
_MAX_SHARED = 1 << 17

#: (group index, VF index) of a virtual function within its device
_VFPos = tuple[int, int]
#: Per device type: (minor, resources, VF position or None) of each allocated device.
Relative = tuple[tuple[DeviceType, tuple[tuple[int, Mapping[str, int], _VFPos | None], ...]], ...]


@dataclass(slots=True)
class SharedFit:
    """A policy's answer for one (signature, request shape), shared by all nodes alike."""

    status: Status
    relative: Relative | None
    #: Raw score, computed on first use.
    score: int | None = None


@dataclass(slots=True)
class NodeFit:
    status: Status
    allocation: Allocation | None
    shared: SharedFit | None = None


class FitMemo:
    """node name -> (device_generation, shape -> NodeFit)."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[str, tuple[int, dict[int, NodeFit]]] = {}

    def get(self, node: NodeInfo, shape: int) -> NodeFit | None:
        entry = self._entries.get(node.name)
        if entry is None or entry[0] != node.device_generation:
            return None
        return entry[1].get(shape)

    def put(self, node: NodeInfo, shape: int, fit: NodeFit) -> None:
        entry = self._entries.get(node.name)
        if entry is None or entry[0] != node.device_generation:
            entry = self._entries[node.name] = (node.device_generation, {})
        elif len(entry[1]) >= _SHAPES_PER_NODE:
            entry[1].clear()
        entry[1][shape] = fit


@dataclass(frozen=True, slots=True)
class _Template:
    device: Device | None
    key: Hashable
    vf_positions: Mapping[tuple[DeviceType, int], Mapping[str, _VFPos]]


class Signatures:
    """node -> small id of everything the allocator reads, identities left out."""

    __slots__ = ("_ids", "_nodes", "_templates")

    def __init__(self) -> None:
        self._templates: dict[str, _Template] = {}
        self._nodes: dict[str, tuple[int, int]] = {}  # name -> (device_generation, id)
        self._ids = Ids(_MAX_SIGNATURES)

    def of(self, node: NodeInfo) -> int:
        cached = self._nodes.get(node.name)
        if cached is not None and cached[0] == node.device_generation:
            return cached[1]
        devices = node.devices
        template = self._templates.get(node.name)
        if template is None or template.device is not devices.device:
            template = self._templates[node.name] = _template(devices)
        usage = []
        for dtype in devices.types():
            positions = template.vf_positions
            for s in devices.states(dtype):
                used_vfs = (
                    frozenset(positions[(dtype, s.minor)].get(k) for k in s.used_vfs) if s.used_vfs else frozenset()
                )
                usage.append(
                    (tuple(sorted(s.used.items())) if s.used else (), bool(s.holders), used_vfs, s.overcommitted)
                )
        exclusive = (
            tuple((t, tuple(sorted(devices.exclusive_pcies(t)))) for t in devices.types())
            if devices.has_exclusive_holdings()
            else ()
        )
        key = (template.key, devices.partitions, tuple(usage), exclusive)
        ident = self._ids.of(key)
        self._nodes[node.name] = (node.device_generation, ident)
        return ident

    def relative(self, node: NodeInfo, allocation: Allocation) -> Relative:
        """The allocation without this node's identities (call `of(node)` first)."""
        positions = self._templates[node.name].vf_positions
        return tuple(
            (
                dtype,
                tuple(
                    (
                        a.minor,
                        a.resources,
                        positions[(dtype, a.minor)].get(vf_key(a.vfs[0].bus_id, a.vfs[0].minor)) if a.vfs else None,
                    )
                    for a in allocs
                ),
            )
            for dtype, allocs in allocation.devices.items()
        )

    @staticmethod
    def materialize(node: NodeInfo, rel: Relative) -> Allocation:
        """A relative allocation on this node's own devices (IDs, VF addresses)."""
        out: dict[DeviceType, tuple[DeviceAllocation, ...]] = {}
        for dtype, items in rel:
            allocs = []
            for minor, amounts, pos in items:
                state = node.devices.state(dtype, minor)
                assert state is not None  # equal signatures: the node has this device
                vfs: tuple[VFAllocation, ...] = ()
                if pos is not None:
                    vf = state.info.vf_groups[pos[0]].vfs[pos[1]]
                    vfs = (VFAllocation(vf.minor, vf.bus_id),)
                allocs.append(DeviceAllocation(minor, amounts, state.info.id, vfs))
            out[dtype] = tuple(allocs)
        return Allocation(out)


def _template(devices: NodeDevices) -> _Template:
    parts = []
    positions: dict[tuple[DeviceType, int], dict[str, _VFPos]] = {}
    for dtype in devices.types():
        for s in devices.states(dtype):
            info = s.info
            vfs = [
                ((vf.bus_id, vf.minor), (g, i))
                for g, group in enumerate(info.vf_groups)
                for i, vf in enumerate(group.vfs)
            ]
            positions[(dtype, s.minor)] = {
                vf_key(vf.bus_id, vf.minor): (g, i)
                for g, group in enumerate(info.vf_groups)
                for i, vf in enumerate(group.vfs)
            }
            parts.append(
                (
                    dtype,
                    s.minor,
                    tuple(sorted(s.total.items())),
                    tuple(sorted(info.resources.items())),
                    tuple(sorted(info.labels.items())),
                    s.pcie,
                    s.numa,
                    tuple((tuple(sorted(g.labels.items())), len(g.vfs)) for g in info.vf_groups),
                    tuple(pos for _, pos in sorted(vfs)),  # the order VFs are handed out in
                )
            )
    device = devices.device
    nvlink = tuple(sorted((m, tuple(sorted(p))) for m, p in device.nvlink.items())) if device is not None else ()
    return _Template(device, (tuple(parts), nvlink), positions)  # the allocator reads NVLink too


class SharedFits:
    """(signature, request shape) -> SharedFit, bounded."""

    __slots__ = ("_fits",)

    def __init__(self) -> None:
        self._fits: dict[tuple[int, int], SharedFit] = {}

    def get(self, signature: int, shape: int) -> SharedFit | None:
        return self._fits.get((signature, shape))

    def put(self, signature: int, shape: int, fit: SharedFit) -> None:
        if len(self._fits) >= _MAX_SHARED:
            self._fits.clear()
        self._fits[(signature, shape)] = fit


class GPUFreeIndex:
    """Nodes by unused GPU count and by best free memory ratio; see the module docstring."""

    __slots__ = ("_cache", "_cursor", "_idle", "_ratio", "_summary")

    def __init__(self, cache: ClusterCache) -> None:
        self._cache = cache
        self._cursor = 0
        self._summary: dict[str, tuple[int, int]] = {}
        self._idle: list[set[str]] = [set()]
        self._ratio: list[set[str]] = [set() for _ in range(101)]

    def sync(self) -> None:
        """Catch up with the cache (cheap: only nodes changed since the last call)."""
        self._cursor, changed = self._cache.changes_since(self._cursor)
        if changed is None:
            for name in list(self._summary):
                self._drop(name)
            changed = tuple(info.name for info in self._cache.nodes())
        for name in changed:
            self._drop(name)
            info = self._cache.node(name)
            if info is not None:
                self._add(info)

    def candidates(self, request: PodDeviceRequest) -> frozenset[str] | None:
        """Nodes that might serve the pod's GPUs, or None when narrowing would not pay."""
        gpu = request.requests.get(DeviceType.GPU)
        if gpu is None:
            return None
        if not gpu.shared:
            buckets = self._idle[gpu.count :]
        elif gpu.count == 1 and names.GPU_MEMORY_RATIO in gpu.per_device:
            buckets = self._ratio[min(gpu.per_device[names.GPU_MEMORY_RATIO], 100) :]
        else:
            return None
        if sum(len(b) for b in buckets) * 2 > len(self._summary):
            return None
        return frozenset().union(*buckets)

    def _add(self, info: NodeInfo) -> None:
        idle = best = 0
        devices = info.devices
        states = devices.states(DeviceType.GPU) if not devices.unknown_holders(DeviceType.GPU) else ()
        for s in states:
            if not s.total or s.overcommitted:
                continue
            if not any(s.used.values()):
                idle += 1
            best = max(best, min(s.free(names.GPU_MEMORY_RATIO), 100))
        self._summary[info.name] = (idle, best)
        while len(self._idle) <= idle:
            self._idle.append(set())
        self._idle[idle].add(info.name)
        self._ratio[best].add(info.name)

    def _drop(self, name: str) -> None:
        old = self._summary.pop(name, None)
        if old is not None:
            self._idle[old[0]].discard(name)
            self._ratio[old[1]].discard(name)
