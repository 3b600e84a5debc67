"""The cluster GPU map as plain values: nodes → PCIe switches → GPUs → the pods' fractions.

Pure functions over parsed objects (`Device` CRs, `Pod`s, pending pods' `DeviceRequest`s), so the
web page, `tessera top` and the benchmark show the same numbers and unit tests check them without
a server. The I/O that feeds them lives in `dashboard.sources`.

Amounts follow the protocol: percent of a GPU for `gpu-core` and `gpu-memory-ratio`, bytes for
`gpu-memory`. Totals count GPU capacity in percent of a GPU (800 = eight whole GPUs):

- allocated: the `gpu-core` the pods' `device-allocated` annotations hold on healthy GPUs;
- reserved: the `gpu-core` Available (or Waiting) Reservations hold there for their owners (their
  own `device-allocated` annotations), less what owners placed onto them already use;
- idle: the rest of the healthy GPUs' `gpu-core`;
- fragmented: the part of idle that no pending pod could use (`fragmented` below);
- unhealthy: the capacity of GPUs the agent reported unhealthy (not idle: nothing can use it).

Pods asking through ResourceClaims (Dynamic Resource Allocation) hold what their claims'
`status.allocation` says, counted as the scheduler counts it (`apis.dra.gpus.koordinator_usage`:
a device taken whole is the whole GPU, a share its consumed `cores` and `memory`), on the node
whose ResourceSlice publishes the device; the share names the claim and the pod it is reserved
for (the first of `status.reservedFor`, as the scheduler counts a shared claim once), or no pod
when none is reserved yet. A pod holding two or more whole GPUs that are one of the node's GPU
partitions (the Device's `gpu-partitions` table, else the built-in table for its model, with the
policy label: `apis.extension.partitions.resolve`) shows that partition.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from apis.crds.device import Device, DeviceInfo, DeviceType
from apis.crds.reservation import Reservation, allocated_from_pod
from apis.dra import gpus as dra_gpus
from apis.dra.claim import ResourceClaim
from apis.dra.slice import ResourceSlice
from apis.errors import AnnotationError
from apis.extension import allocation, names, partitions
from apis.extension.devicerequest import DeviceRequest, gpu_allocation_resources
from apis.k8s.core import Pod
from dashboard.invalid import Invalid
from dashboard.reservations import owners_text

__all__ = [
    "GPU",
    "RDMA",
    "ClusterMap",
    "NodeMap",
    "PCIeGroup",
    "Reserved",
    "Share",
    "Totals",
    "build",
    "fragmented",
    "totals",
]

#: A whole device, in the percent units of `gpu-core` and `gpu-memory-ratio`.
WHOLE = 100


@dataclass(frozen=True, slots=True)
class Share:
    """What one pod holds of one device."""

    pod: str  # namespace/name
    core: int = 0  # percent
    memory: int = 0  # bytes
    memory_ratio: int = 0  # percent
    vfs: int = 0  # RDMA virtual functions
    #: The Reservation the pod was placed onto (its `reservation-allocated` annotation), or ''.
    reservation: str = ""
    #: The ResourceClaim (namespace/name) the share is held through, or '' (Koordinator's protocol).
    claim: str = ""
    #: The GPU partition the pod's whole GPUs are on this node (`[0,1,2,3] (source, policy)`), or ''.
    partition: str = ""


@dataclass(frozen=True, slots=True)
class Reserved:
    """What one Available Reservation holds of one device for its owners, less what the owners
    placed onto it use there already."""

    reservation: str  # its name (cluster-scoped)
    owners: tuple[str, ...]  # `owners_text` of each owner
    core: int = 0  # percent
    memory: int = 0  # bytes
    memory_ratio: int = 0  # percent
    vfs: int = 0


@dataclass(frozen=True, slots=True)
class GPU:
    minor: int
    healthy: bool
    #: Why it is unhealthy, as the agent wrote it (`Xid79`); "" when healthy or not said.
    problem: str
    #: Total memory in bytes (0 when the Device CR does not say).
    memory: int
    #: Index of its NVLink group on the node (`NodeMap.nvlink`), or None without NVLink.
    nvlink_group: int | None
    shares: tuple[Share, ...] = ()
    reserved: tuple[Reserved, ...] = ()

    @property
    def used_core(self) -> int:
        return min(WHOLE, sum(s.core for s in self.shares))

    @property
    def reserved_core(self) -> int:
        """Percent of the GPU's cores Reservations hold (beyond what pods use: capped at whole)."""
        return min(WHOLE - self.used_core, sum(r.core for r in self.reserved))

    @property
    def reserved_ratio(self) -> int:
        return min(WHOLE - self.used_ratio, sum(r.memory_ratio for r in self.reserved))

    @property
    def used_ratio(self) -> int:
        return min(WHOLE, sum(s.memory_ratio for s in self.shares))

    @property
    def used_memory(self) -> int:
        return sum(s.memory for s in self.shares)

    @property
    def reserved_memory(self) -> int:
        return sum(r.memory for r in self.reserved)

    @property
    def free_core(self) -> int:
        """Percent of the GPU's cores no pod and no Reservation holds; 0 when unhealthy."""
        return WHOLE - self.used_core - self.reserved_core if self.healthy else 0


@dataclass(frozen=True, slots=True)
class RDMA:
    minor: int
    healthy: bool
    problem: str
    vfs_total: int
    shares: tuple[Share, ...] = ()
    reserved: tuple[Reserved, ...] = ()

    @property
    def vfs_used(self) -> int:
        return sum(s.vfs for s in self.shares)


@dataclass(frozen=True, slots=True)
class PCIeGroup:
    """The devices behind one PCIe switch (or root): GPUs and the NICs that share their path."""

    pcie: str  # "" when the Device CR gives no topology
    gpus: tuple[GPU, ...]
    rdma: tuple[RDMA, ...]


@dataclass(frozen=True, slots=True)
class NodeMap:
    name: str
    groups: tuple[PCIeGroup, ...]
    #: The GPU minors NVLink joins, one tuple per connected group.
    nvlink: tuple[tuple[int, ...], ...] = ()

    @property
    def gpus(self) -> tuple[GPU, ...]:
        return tuple(gpu for group in self.groups for gpu in group.gpus)


@dataclass(frozen=True, slots=True)
class Totals:
    """GPU capacity in percent of a GPU; `gpus` and `unhealthy_gpus` count devices."""

    gpus: int
    unhealthy_gpus: int
    allocated: int
    idle: int
    fragmented: int
    unhealthy: int
    reserved: int = 0


@dataclass(frozen=True, slots=True)
class ClusterMap:
    nodes: tuple[NodeMap, ...]
    #: Pods whose `device-allocated` annotation could not be read: `namespace/name: reason`.
    problems: tuple[str, ...] = ()


#: Node -> (device type, minor) -> what is held there.
_Held = dict[str, dict[tuple[DeviceType, int], list[Share]]]
_ReservedOn = dict[str, dict[tuple[DeviceType, int], list[Reserved]]]


def build(
    devices: Iterable[Device],
    pods: Iterable[Pod],
    reservations: Iterable[Reservation | Invalid] = (),
    *,
    claims: Iterable[ResourceClaim | Invalid] = (),
    slices: Iterable[ResourceSlice | Invalid] = (),
) -> ClusterMap:
    """The map of every node with a Device CR, nodes sorted by name, with the fractions the
    bound, live pods hold (from their `device-allocated` annotations), what allocated `claims`
    hold (by `slices`) and what Available Reservations hold for their owners (theirs; an
    `Invalid` one holds nothing that can be read). A malformed annotation is
    skipped and reported in `problems`, never raised."""
    held: _Held = {}
    problems: list[str] = []
    _claim_shares(claims, slices, held)
    for pod in pods:
        if not pod.node_name or pod.is_terminal:
            continue
        text = pod.annotations.get(names.ANNOTATION_DEVICE_ALLOCATED)
        if not text:
            continue
        try:
            allocations = _decode(text, pod.key)
        except AnnotationError as e:
            problems.append(f"{pod.key}: {e}")
            continue
        consumed = _consumed(pod, problems)
        on_node = held.setdefault(pod.node_name, {})
        for dtype, allocated in allocations.items():
            for a in allocated:
                on_node.setdefault((dtype, a.minor), []).append(_share(pod.key, a, consumed))
    reserved = _reserved([r for r in reservations if isinstance(r, Reservation)], held, problems)
    nodes = tuple(
        _node(device, _with_partitions(device, held.get(device.node_name, {})), reserved.get(device.node_name, {}))
        for device in sorted(devices, key=lambda d: d.node_name)
    )
    return ClusterMap(nodes, tuple(sorted(problems)))


def _claim_shares(
    claims: Iterable[ResourceClaim | Invalid], slices: Iterable[ResourceSlice | Invalid], held: _Held
) -> None:
    """What allocated claims hold of our GPUs, into `held`, by the node of the slices that publish
    the devices (see the module docstring)."""
    by_node: dict[str, list[ResourceSlice]] = {}
    pool_node: dict[tuple[str, str], str] = {}
    for s in slices:
        if isinstance(s, ResourceSlice) and s.node_name and s.driver == dra_gpus.DRIVER:
            by_node.setdefault(s.node_name, []).append(s)
            pool_node[(s.driver, s.pool.name)] = s.node_name
    for claim in claims:
        if not isinstance(claim, ResourceClaim) or claim.allocation is None:
            continue
        consumer = next((c for c in claim.reserved_for if c.resource == "pods"), None)
        pod = f"{claim.meta.namespace}/{consumer.name}" if consumer is not None else ""
        nodes = {pool_node[(r.driver, r.pool)] for r in claim.allocation.results if (r.driver, r.pool) in pool_node}
        for node in sorted(nodes):
            usage = dra_gpus.koordinator_usage([claim.allocation], by_node[node], node=node)
            on_node = held.setdefault(node, {})
            for minor, resources in sorted(usage.items()):
                on_node.setdefault((DeviceType.GPU, minor), []).append(
                    Share(
                        pod,
                        core=resources.get(names.GPU_CORE, 0),
                        memory=resources.get(names.GPU_MEMORY, 0),
                        memory_ratio=resources.get(names.GPU_MEMORY_RATIO, 0),
                        claim=claim.key,
                    )
                )


def _with_partitions(
    device: Device, held: Mapping[tuple[DeviceType, int], list[Share]]
) -> Mapping[tuple[DeviceType, int], list[Share]]:
    """`held` with each share of a pod whose two or more whole GPUs here are one of the node's
    partitions marked with it (the Device's labels stand for the node's: the agent labels both)."""
    node = partitions.resolve(device.gpu_partitions, device.meta.labels, device.meta.labels)
    if node is None or node.table is None:
        return held
    whole: dict[str, list[int]] = {}
    for (dtype, minor), shares in held.items():
        for s in shares:
            if dtype is DeviceType.GPU and s.pod and s.core >= WHOLE:
                whole.setdefault(s.pod, []).append(minor)
    found = {pod: node.describe(minors) for pod, minors in whole.items() if len(minors) >= 2}
    if not any(found.values()):
        return held
    return {
        key: [dataclasses.replace(s, partition=found.get(s.pod, "")) if key[0] is DeviceType.GPU else s for s in shares]
        for key, shares in held.items()
    }


def _consumed(pod: Pod, problems: list[str]) -> str:
    """The Reservation `pod` was placed onto, '' for none (or an unreadable annotation, reported)."""
    try:
        consumed = allocated_from_pod(pod)
    except AnnotationError as e:
        problems.append(f"{pod.key}: {e}")
        return ""
    return consumed.name if consumed is not None else ""


def _reserved(reservations: Sequence[Reservation], held: _Held, problems: list[str]) -> _ReservedOn:
    """What each placed, Available (or Waiting) Reservation holds, by node and device: its own
    `device-allocated` annotation, less what the pods placed onto it (by name) use of the same
    device (an `allocateOnce: false` Reservation keeps holding while its owners run on it)."""
    out: _ReservedOn = {}
    for r in reservations:
        text = r.meta.annotations.get(names.ANNOTATION_DEVICE_ALLOCATED)
        if not r.phase.holds_resources or not r.node_name or not text:
            continue
        try:
            allocations = _decode(text, f"reservation {r.name}")
        except AnnotationError as e:
            problems.append(f"reservation {r.name}: {e}")
            continue
        owners = tuple(owners_text(o) for o in r.owners)
        on_node = out.setdefault(r.node_name, {})
        used_on_node = held.get(r.node_name, {})
        for dtype, allocated in allocations.items():
            for a in allocated:
                whole = _share(r.name, a, "")
                used = [s for s in used_on_node.get((dtype, a.minor), ()) if s.reservation == r.name]
                left = Reserved(
                    r.name,
                    owners,
                    core=max(0, whole.core - sum(s.core for s in used)),
                    memory=max(0, whole.memory - sum(s.memory for s in used)),
                    memory_ratio=max(0, whole.memory_ratio - sum(s.memory_ratio for s in used)),
                    vfs=max(0, whole.vfs - sum(s.vfs for s in used)),
                )
                if left.core or left.memory or left.memory_ratio or left.vfs:
                    on_node.setdefault((dtype, a.minor), []).append(left)
    return out


@functools.lru_cache(maxsize=1 << 16)
def _decode(text: str, obj: str) -> Mapping[DeviceType, tuple[allocation.DeviceAllocation, ...]]:
    """The annotation, decoded once per distinct value: the map is rebuilt on every change, and
    most pods' annotations have not changed since the last time."""
    return allocation.decode(text, obj=obj)


def _share(pod: str, a: allocation.DeviceAllocation, reservation: str) -> Share:
    res = a.resources
    return Share(
        pod,
        core=res.get(names.GPU_CORE, 0),
        memory=res.get(names.GPU_MEMORY, 0),
        memory_ratio=res.get(names.GPU_MEMORY_RATIO, 0),
        vfs=len(a.vfs),
        reservation=reservation,
    )


def _node(
    device: Device,
    held: Mapping[tuple[DeviceType, int], list[Share]],
    reserved: Mapping[tuple[DeviceType, int], list[Reserved]],
) -> NodeMap:
    nvlink = _nvlink_groups(device.nvlink)
    group_of = {minor: i for i, members in enumerate(nvlink) for minor in members}
    by_switch: dict[str, tuple[list[GPU], list[RDMA]]] = {}
    for info in device.devices:
        pcie = info.topology.pcie_id if info.topology is not None else ""
        gpus, nics = by_switch.setdefault(pcie, ([], []))
        shares = tuple(sorted(held.get((info.type, info.minor), ()), key=lambda s: s.pod))
        kept = tuple(sorted(reserved.get((info.type, info.minor), ()), key=lambda r: r.reservation))
        if info.type is DeviceType.GPU:
            memory = info.resources.get(names.GPU_MEMORY, 0)
            gpus.append(GPU(info.minor, info.health, _problem(info), memory, group_of.get(info.minor), shares, kept))
        elif info.type is DeviceType.RDMA:
            vfs = sum(len(g.vfs) for g in info.vf_groups)
            nics.append(RDMA(info.minor, info.health, _problem(info), vfs, shares, kept))
    groups = tuple(
        PCIeGroup(pcie, tuple(gpus), tuple(nics))
        for pcie, (gpus, nics) in sorted(by_switch.items(), key=lambda kv: _first_minor(kv[1]))
        if gpus or nics
    )
    return NodeMap(device.node_name, groups, nvlink)


def _first_minor(devices: tuple[list[GPU], list[RDMA]]) -> tuple[int, int]:
    """Switches in the order of their first GPU (then first NIC), as people number them."""
    gpus, nics = devices
    return (min((g.minor for g in gpus), default=1 << 30), min((n.minor for n in nics), default=1 << 30))


def _problem(info: DeviceInfo) -> str:
    """The reason of the device's failed condition (`Xid79`), else ''."""
    if info.health:
        return ""
    for condition in info.conditions:
        if condition.status != "True" and condition.reason:
            return condition.reason
    return "Unhealthy"


def _nvlink_groups(nvlink: Mapping[int, frozenset[int]]) -> tuple[tuple[int, ...], ...]:
    """Connected components of the NVLink graph, each sorted, ordered by their first GPU."""
    seen: set[int] = set()
    groups: list[tuple[int, ...]] = []
    for start in sorted(nvlink):
        if start in seen:
            continue
        stack, members = [start], set()
        while stack:
            minor = stack.pop()
            if minor in members:
                continue
            members.add(minor)
            stack.extend(nvlink.get(minor, ()))
        seen |= members
        groups.append(tuple(sorted(members)))
    return tuple(groups)


def fragmented(nodes: Sequence[NodeMap], pending: Sequence[DeviceRequest]) -> dict[tuple[str, int], int]:
    """Idle GPU capacity no pending pod could use: (node, GPU minor) -> percent of that GPU.

    A healthy GPU's idle share counts as fragmented when no pending GPU request fits it: a
    request fits a GPU when its per-GPU `gpu-core` and memory (as `gpu-memory-ratio`, with
    `gpu-memory` converted at this GPU's size) fit what the GPU has free, and the node has at
    least as many GPUs it fits as the request needs GPUs. Only devices count (not CPU, memory,
    affinity, RDMA or quota), so this is an upper bound of what the pending mix could use. With
    no pending GPU request nothing is fragmented: idle capacity nobody asks for is just idle.
    """
    # Many pending pods ask for the same shape (a gang, a job's replicas): each shape once.
    shapes = {(r.count, tuple(sorted(r.per_device.items()))): r for r in pending if r.type is DeviceType.GPU}
    requests = sorted(shapes.values(), key=lambda r: r.count)
    out: dict[tuple[str, int], int] = {}
    if not requests:
        return out
    for node in nodes:
        gpus = [_Free.of(g) for g in node.gpus if g.free_core > 0]
        usable: set[int] = set()
        for request in requests:
            if len(usable) == len(gpus):
                break
            fits = [g.minor for g in gpus if g.fits(request)]
            if len(fits) >= request.count:
                usable.update(fits)
        for gpu in gpus:
            if gpu.minor not in usable:
                out[(node.name, gpu.minor)] = gpu.core
    return out


@dataclass(frozen=True, slots=True)
class _Free:
    """What one GPU has free, computed once per `fragmented` call."""

    minor: int
    core: int
    ratio: int
    memory: int  # bytes free; -1 when the Device CR gives no size (memory is then not checked)
    total_memory: int

    @classmethod
    def of(cls, gpu: GPU) -> _Free:
        memory = gpu.memory - gpu.used_memory - gpu.reserved_memory if gpu.memory else -1
        return cls(gpu.minor, gpu.free_core, WHOLE - gpu.used_ratio - gpu.reserved_ratio, memory, gpu.memory)

    def fits(self, request: DeviceRequest) -> bool:
        need = gpu_allocation_resources(request, self.total_memory)
        if need.get(names.GPU_CORE, 0) > self.core:
            return False
        if need.get(names.GPU_MEMORY_RATIO, 0) > self.ratio:
            return False
        return self.memory < 0 or need.get(names.GPU_MEMORY, 0) <= self.memory


def totals(nodes: Sequence[NodeMap], fragments: Mapping[tuple[str, int], int]) -> Totals:
    gpus = [gpu for node in nodes for gpu in node.gpus]
    healthy = [g for g in gpus if g.healthy]
    return Totals(
        gpus=len(gpus),
        unhealthy_gpus=len(gpus) - len(healthy),
        allocated=sum(g.used_core for g in healthy),
        idle=sum(g.free_core for g in healthy),
        fragmented=sum(fragments.values()),
        unhealthy=WHOLE * (len(gpus) - len(healthy)),
        reserved=sum(g.reserved_core for g in healthy),
    )
