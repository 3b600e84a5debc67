"""Which devices of one node a pod gets: pure functions of (node devices, pod request).

`AllocationPolicy` is the seam: the DeviceShare plugin does the bookkeeping (parsing requests,
memoising per node, reserving in the cache, writing the annotation) and asks a policy only two
questions — which devices on this node (`allocate`), and how good is this node (`score`). A
better placement policy (fragmentation-aware, like FGD) is a new class in `POLICIES`; nothing
else changes.

`TopologyAwarePolicy` implements the protocol's semantics (protocol.md, "Scheduling semantics"),
following Koordinator's DeviceShare:

- A device is a candidate when it is healthy, not over-committed (`DeviceState.overcommitted`:
  pods that bypassed the scheduler hold more than it has, so it counts as full), matches the
  hint's `selector`, has the per-device amounts free (a whole-device request needs it entirely
  unused), is not on a PCIe switch another pod holds exclusively, satisfies the pod's own
  `exclusivePolicy` (DeviceLevel: no other holder; PCIeLevel — enforced here, unlike
  Koordinator — no other holder on the switch), and offers a free virtual function when one
  is needed (a `vfSelector`, or an RDMA/FPGA share below 100 on a device that has VFs:
  `koordinator.sh/rdma: 1` is one VF).
- GPU partitions first (Koordinator's, `partitions`): for whole GPUs on a node with partitions
  (`NodeDevices.partitions`) or for a pod with a `gpu-partition-spec`, a free partition of the
  node's table when there is one; when the partitions bind the pod (`Honor`, or the spec) a
  partition or nothing, with a reason naming what keeps each partition from it.
- NVLink next (beyond Koordinator, which does not know NVLink): for two or more GPUs on a node
  whose Device says which GPUs NVLink joins (`Device.nvlink`), take a set fully connected by
  NVLink when the node has one — chosen among such sets by the scope rules below — and only
  otherwise place by the scope rules alone. On an NVSwitch node every set is connected, so
  this changes nothing there, nor on nodes without NVLink.
- Scope: take the deepest scope that holds the whole request — one PCIe switch, else one NUMA
  node, else the node — never wider than `requiredTopologyScope`. Among scopes of one depth,
  prefer the one already partly used (topology bin-packing leaves empty switches whole for
  multi-device pods); for shared requests, then the best device score.
- Devices within the scope: partly used switches first, then (shared requests) the device
  score — LeastAllocated picks the emptiest device, MostAllocated the fullest that fits — then
  the lowest minor.
- Joint allocation (`device-joint-allocate`), Koordinator's rule: the types taking part are
  those the pod asks for, less any with `allocateStrategy: ApplyForAll`; the first is primary
  and goes first. Each secondary type then takes up to one device per PCIe switch of the
  primary's devices, and at least what it asks for (`koordinator.sh/rdma: 1` with GPUs on three
  switches: three VFs, one per switch): devices in rounds — the best free device of each of
  those switches, then the second best of each, ... — then devices on other switches, best
  (device score, then lowest minor) first. Without a scope that is best effort: a switch with
  no free device of the type leaves the pod with fewer, or one from another switch.
  `requiredScope: SamePCIe` makes it a rule: at least one device per primary switch, on exactly
  the primary's switches, else `Device Joint-Allocate rules violation`. Beyond Koordinator
  (which places the primary blind and then rejects the node), the primary is placed only on
  switches where every secondary type has a free device. A GPU secondary (an unusual order)
  gets only the GPUs it asks for. Without a joint annotation, other types still prefer the
  GPUs' switches.
- `allocateStrategy` (RDMA/FPGA only, as in Koordinator): `ApplyForAll` gives the request on
  every matching device; `RequestsAsCount` reads the amount as a number of devices (one VF
  each, or whole devices with `exclusivePolicy: DeviceLevel`).
- A node that could not serve the request even if it were empty says
  UnschedulableAndUnresolvable (no preemption can help); otherwise Unschedulable, with the
  nearest miss as `Shortfall`s.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from apis.crds.device import DeviceType, VirtualFunction
from apis.extension import devicetypes, names
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.extension.devicerequest import DeviceRequest, gpu_allocation_resources
from apis.extension.hints import AllocateStrategy, DeviceHint, ExclusivePolicy, JointAllocate, JointScope, TopologyScope
from apis.extension.partitions import NodePartitions, PartitionSpec
from apis.k8s.labels import LabelSelector
from scheduler import fragmentation
from scheduler.cache.devices import DeviceState, NodeDevices, vf_key
from scheduler.framework.scoring import ScoringStrategy
from scheduler.framework.status import Code, Shortfall
from scheduler.plugins.deviceshare import partitions, reasons

__all__ = [
    "POLICIES",
    "Allocation",
    "AllocationPolicy",
    "FragmentationAwarePolicy",
    "PodDeviceRequest",
    "Rejection",
    "TopologyAwarePolicy",
]

#: Types asked for in one percent-of-a-device resource (RDMA, FPGA): `allocateStrategy` applies
#: to them only, as in Koordinator.
_PERCENT_TYPES = frozenset(s.type for s in devicetypes.TABLE if s.request_rule is devicetypes.RequestRule.PERCENT)
_PCIE, _NUMA, _NODE = TopologyScope.PCIE, TopologyScope.NUMA_NODE, TopologyScope.NODE
_LEVELS: Mapping[TopologyScope | None, tuple[TopologyScope, ...]] = {
    None: (_PCIE, _NUMA, _NODE),
    TopologyScope.NODE: (_PCIE, _NUMA, _NODE),
    TopologyScope.NUMA_NODE: (_PCIE, _NUMA),
    TopologyScope.PCIE: (_PCIE,),
    TopologyScope.DEVICE: (_PCIE,),
}


@dataclass(frozen=True, slots=True)
class PodDeviceRequest:
    """What a pod asks of devices, parsed once per pod by the plugin."""

    requests: Mapping[DeviceType, DeviceRequest]
    hints: Mapping[DeviceType, DeviceHint] = field(default_factory=dict)
    joint: JointAllocate | None = None
    #: The GPU demand of the target workload, for a policy that measures fragmentation against
    #: it (`AllocationPolicy.uses_workload`); DeviceShare attaches its current one.
    demand: fragmentation.Demand | None = None
    #: The pod's `gpu-partition-spec` (None: none; the node's policy alone decides).
    partition_spec: PartitionSpec | None = None

    def effective_joint(self) -> JointAllocate | None:
        """The joint rule over the types it names that the pod asks for, less those with
        `allocateStrategy: ApplyForAll` (they take every device anyway), as Koordinator trims
        it; None when fewer than two types are left."""
        joint = self.joint
        if joint is None:
            return None
        types = tuple(t for t in joint.device_types if t in self.requests and not self._applies_for_all(t))
        if len(types) < 2:
            return None
        return joint if types == joint.device_types else JointAllocate(types, joint.required_scope)

    def _applies_for_all(self, dtype: DeviceType) -> bool:
        hint = self.hints.get(dtype)
        return hint is not None and hint.allocate_strategy is AllocateStrategy.APPLY_FOR_ALL

    def order(self) -> tuple[DeviceType, ...]:
        """Types in allocation order: the joint primary first, then the device type table's
        order (`devicetypes.ALLOCATION_ORDER`: GPU, RDMA, FPGA), which lists every type."""
        joint = self.effective_joint()
        first = (joint.primary,) if joint is not None else ()
        return first + tuple(t for t in devicetypes.ALLOCATION_ORDER if t in self.requests and t not in first)

    @property
    def pcie_exclusive(self) -> frozenset[DeviceType]:
        return frozenset(t for t, h in self.hints.items() if h.exclusive_policy is ExclusivePolicy.PCIE_LEVEL)


@dataclass(frozen=True, slots=True)
class Allocation:
    devices: Mapping[DeviceType, tuple[DeviceAllocation, ...]]


@dataclass(frozen=True, slots=True)
class Rejection:
    code: Code
    reason: str
    shortfalls: tuple[Shortfall, ...] = ()
    #: Further sentences for people (after `reason`, which stays Koordinator's words).
    details: tuple[str, ...] = ()


class AllocationPolicy(abc.ABC):
    """Placement policy: which devices of a node, and how good the node is. Pure."""

    name: ClassVar[str]
    #: Whether the policy wants `PodDeviceRequest.demand` (DeviceShare then learns a workload).
    uses_workload: ClassVar[bool] = False

    @abc.abstractmethod
    def allocate(self, devices: NodeDevices, request: PodDeviceRequest) -> Allocation | Rejection:
        """Devices for the pod on this node, or why not."""

    @abc.abstractmethod
    def score(self, devices: NodeDevices, request: PodDeviceRequest, allocation: Allocation) -> int:
        """Raw node score (higher is better) once `allocation` is placed; the plugin normalizes."""


@dataclass(frozen=True, slots=True)
class _Need:
    """One device type's request as it applies to one node."""

    type: DeviceType
    request: DeviceRequest
    count: int
    per_device: Mapping[str, int]
    whole: bool
    selector: LabelSelector | None
    vf_selector: LabelSelector | None
    scope: TopologyScope | None
    device_exclusive: bool
    pcie_exclusive: bool
    #: The workload's GPU demand, for a share of one GPU (see FragmentationAwarePolicy).
    demand: fragmentation.Demand | None = None
    #: GPU minor -> its NVLink peers, for two or more GPUs on a node with NVLink; else None.
    nvlink: Mapping[int, frozenset[int]] | None = None
    #: Whole GPUs only: the node's partitions and the pod's spec (`partitions.choose`); both
    #: None when partitions play no part.
    partitions: NodePartitions | None = None
    partition_spec: PartitionSpec | None = None

    @property
    def by_partition(self) -> bool:
        return self.partitions is not None or self.partition_spec is not None

    def amounts(self, state: DeviceState) -> Mapping[str, int]:
        if self.type is DeviceType.GPU:
            return gpu_allocation_resources(self.request, state.info.resources.get(names.GPU_MEMORY, 0))
        return self.per_device

    def needs_vf(self, state: DeviceState) -> bool:
        if self.type is DeviceType.GPU:
            return False
        return self.vf_selector is not None or (not self.whole and state.has_vfs())


@dataclass(slots=True)
class _Cand:
    state: DeviceState
    amounts: Mapping[str, int]
    vf: VirtualFunction | None
    score: int = 0


@dataclass(frozen=True, slots=True)
class _Prefer:
    """Switches and NUMA nodes to prefer (where the pod's other devices are)."""

    pcies: frozenset[str]
    numas: frozenset[int]


def _scope_key(level: TopologyScope, state: DeviceState) -> object:
    """Scope a device belongs to at a level; a device without topology is a scope of its own."""
    if level is _PCIE:
        return state.pcie if state.pcie is not None else ("device", state.minor)
    if level is _NUMA:
        return state.numa if state.numa is not None else ("device", state.minor)
    return None


class TopologyAwarePolicy(AllocationPolicy):
    """Koordinator's topology-aware placement; see the module docstring."""

    name = "TopologyAware"
    #: Whether the device score outranks a partly used scope when choosing where a share goes.
    fit_before_topology: ClassVar[bool] = False

    def __init__(self, scoring: ScoringStrategy) -> None:
        self.scoring = scoring
        self._names = scoring.names

    # --- allocate ---------------------------------------------------------------------------------
    def allocate(self, devices: NodeDevices, request: PodDeviceRequest) -> Allocation | Rejection:
        out: dict[DeviceType, tuple[DeviceAllocation, ...]] = {}
        joint = request.effective_joint()
        needs: dict[DeviceType, _Need] = {}
        for dtype in request.order():
            need = self._need(devices, dtype, request)
            if isinstance(need, Rejection):
                return need
            needs[dtype] = need
        primary_allowed = None
        if joint is not None and joint.required_scope is JointScope.SAME_PCIE:
            found = self._joint_pcies(devices, joint, needs)
            if isinstance(found, Rejection):
                return found
            primary_allowed = found
        chosen_pcies: list[str] = []
        chosen_numas: set[int] = set()
        for dtype, need in needs.items():
            first_type = not out
            states = devices.states(dtype)
            cands = self._candidates(devices, states, need)
            picked: list[_Cand] | None
            if joint is not None and dtype is joint.primary and primary_allowed is not None:
                picked = self._select([c for c in cands if c.state.pcie in primary_allowed], need, states, None)
                if picked is None:
                    anywhere = self._select(cands, need, states, None)
                    if anywhere is not None:
                        return self._joint_miss(devices, joint, needs, anywhere)
            elif joint is not None and dtype in joint.device_types[1:]:
                same_pcie = joint.required_scope is JointScope.SAME_PCIE
                followed = self._follow_primary(cands, chosen_pcies, need, states, same_pcie=same_pcie)
                if isinstance(followed, Rejection):
                    return followed
                picked = followed
            else:
                prefer = _Prefer(frozenset(chosen_pcies), frozenset(chosen_numas)) if chosen_pcies else None
                picked = self._select(cands, need, states, prefer)
            if picked is None:
                return self._reject(states, need, len(cands), cands)
            out[dtype] = tuple(_allocation(c) for c in picked)
            if first_type:  # the primary type: the others follow its switches
                for c in picked:
                    if c.state.pcie is not None and c.state.pcie not in chosen_pcies:
                        chosen_pcies.append(c.state.pcie)
                    if c.state.numa is not None:
                        chosen_numas.add(c.state.numa)
        return Allocation(out)

    def _need(self, devices: NodeDevices, dtype: DeviceType, request: PodDeviceRequest) -> _Need | Rejection:
        req = request.requests[dtype]
        hint = request.hints.get(dtype, DeviceHint())
        count, per_device, whole = req.count, req.per_device, not req.shared
        if hint.allocate_strategy is not None and dtype in _PERCENT_TYPES:
            resource = devicetypes.spec(dtype).percent_resource
            if hint.allocate_strategy is AllocateStrategy.APPLY_FOR_ALL:
                count = sum(
                    1
                    for s in devices.states(dtype)
                    if s.healthy and (hint.selector is None or hint.selector.matches(s.info.labels))
                )
                if count == 0:
                    return Rejection(
                        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons.INSUFFICIENT_DEVICES.format(type=dtype.value)
                    )
            else:  # RequestsAsCount: the amount is a number of devices
                count = req.count * req.per_device.get(resource, 0)
                exclusive = hint.exclusive_policy is ExclusivePolicy.DEVICE_LEVEL
                per_device = {resource: 100 if exclusive else 1}
                whole = exclusive
        device = devices.device
        nvlink = device.nvlink if device is not None and dtype is DeviceType.GPU and count > 1 else None
        by_partition = dtype is DeviceType.GPU and whole  # a share is placed as without partitions
        return _Need(
            type=dtype,
            request=req,
            count=count,
            per_device=per_device,
            whole=whole,
            selector=hint.selector,
            vf_selector=hint.vf_selector,
            scope=hint.required_topology_scope,
            device_exclusive=hint.exclusive_policy is ExclusivePolicy.DEVICE_LEVEL,
            pcie_exclusive=hint.exclusive_policy is ExclusivePolicy.PCIE_LEVEL,
            demand=request.demand if dtype is DeviceType.GPU and not whole and count == 1 else None,
            nvlink=nvlink or None,
            partitions=devices.partitions if by_partition else None,
            partition_spec=request.partition_spec if by_partition else None,
        )

    def _candidates(self, devices: NodeDevices, states: Sequence[DeviceState], need: _Need) -> list[_Cand]:
        blocked = devices.exclusive_pcies(need.type) if devices.has_exclusive_holdings() else set()
        busy: set[object] = set()
        if need.pcie_exclusive:
            busy = {_scope_key(_PCIE, s) for s in states if s.holders}
        selector = need.selector
        out = []
        for s in states:
            total = s.total
            if not total or s.overcommitted:
                continue  # unhealthy, or over-committed by pods that bypassed the scheduler: full
            if selector is not None and not selector.matches(s.info.labels):
                continue
            if blocked and s.pcie in blocked:
                continue
            if need.device_exclusive and s.holders:
                continue
            if busy and _scope_key(_PCIE, s) in busy:
                continue
            used = s.used
            if need.whole and used and any(used.values()):
                continue
            amounts = need.amounts(s)
            fits = True
            for n, a in amounts.items():
                if total.get(n, 0) - used.get(n, 0) < a:
                    fits = False
                    break
            if not fits:
                continue
            vf = None
            if need.needs_vf(s):
                vf = _free_vf(s, need.vf_selector)
                if vf is None:
                    continue
            out.append(_Cand(s, amounts, vf))
        if not need.whole:
            self._score_candidates(out, need, states)
        return out

    def _score_candidates(self, cands: list[_Cand], need: _Need, states: Sequence[DeviceState]) -> None:
        """Device scores of the candidates for a shared request (higher is better)."""
        for c in cands:
            c.score = self._device_score(c)

    def _device_score(self, cand: _Cand) -> int:
        total, used, amounts = cand.state.total, cand.state.used, cand.amounts
        requested = []
        capacity = []
        for n in self._names:
            requested.append(used.get(n, 0) + amounts.get(n, 0))
            capacity.append(total.get(n, 0))
        return self.scoring.score(requested, capacity)

    def _select(
        self, cands: list[_Cand], need: _Need, states: Sequence[DeviceState], prefer: _Prefer | None
    ) -> list[_Cand] | None:
        count = need.count
        if need.by_partition:
            found = self._partition(cands, need, states)
            if isinstance(found, partitions.Choice):
                by_minor = {c.state.minor: c for c in cands}
                return [by_minor[m] for m in found.partition.minors]
            if isinstance(found, partitions.Miss):
                return None
        if len(cands) < count or (need.scope is TopologyScope.DEVICE and count > 1):
            return None
        nvlink = need.nvlink
        if nvlink is not None:
            linked = self._place(cands, need, states, prefer, lambda group: _cliques(group, nvlink, count))
            if linked is not None:
                return linked
        return self._place(cands, need, states, prefer, None)

    @staticmethod
    def _partition(
        cands: list[_Cand], need: _Need, states: Sequence[DeviceState]
    ) -> partitions.Choice | partitions.Miss | None:
        """`partitions.choose` for this need: the candidates, and what keeps the others out."""
        candidates = {c.state.minor for c in cands}
        why_not: dict[int, str] = {}
        taken: set[int] = set()
        for s in states:
            if not s.total:
                why_not[s.minor] = f"GPU {s.minor} is unhealthy"
            elif s.overcommitted:
                why_not[s.minor] = f"GPU {s.minor} is over-committed"
            elif s.holders:
                why_not[s.minor] = f"GPU {s.minor} is in use"
            else:
                if s.minor not in candidates:
                    why_not[s.minor] = f"GPU {s.minor} is not allowed by the pod's hints"
                continue
            taken.add(s.minor)
        return partitions.choose(
            need.partitions, need.partition_spec, need.count, candidates=candidates, taken=taken, why_not=why_not
        )

    def _place(
        self,
        cands: list[_Cand],
        need: _Need,
        states: Sequence[DeviceState],
        prefer: _Prefer | None,
        split: Callable[[list[_Cand]], list[list[_Cand]]] | None,
    ) -> list[_Cand] | None:
        """The scope rules (module docstring): the deepest scope level with a group of candidates
        that holds the request, the best such group, `count` devices of it. With `split`, a
        group is the candidates `split` makes of one scope's (NVLink-connected sets), at
        every level, the node included."""
        count = need.count
        used_pcies, used_numas = _used_scopes(states)
        node_used = 1 if any(s.holders for s in states) else 0
        for level in _LEVELS[need.scope]:
            if level is _NODE and split is None:
                return self._choose(cands, count, used_pcies, prefer)
            groups: dict[object, list[_Cand]] = {}
            for c in cands:
                groups.setdefault(_scope_key(level, c.state), []).append(c)
            best: list[_Cand] | None = None
            best_rank: tuple[int, int, int] | None = None
            for key, group in (
                groups.items() if split is None else ((k, g) for k, scoped in groups.items() for g in split(scoped))
            ):
                if len(group) < count:
                    continue
                first = group[0].state
                not_empty = node_used + (_scope_key(_NUMA, first) in used_numas)
                if level is _PCIE:
                    not_empty += key in used_pcies
                fit = max(c.score for c in group) if not need.whole else 0
                rank = (
                    (_preference(level, first, prefer), fit, not_empty)
                    if self.fit_before_topology
                    else (_preference(level, first, prefer), not_empty, fit)
                )
                if best_rank is None or rank > best_rank:
                    best, best_rank = group, rank
            if best is not None:
                return self._choose(best, count, used_pcies, prefer)
        return None

    @staticmethod
    def _choose(group: list[_Cand], count: int, used_pcies: set[object], prefer: _Prefer | None) -> list[_Cand]:
        """`count` devices of the group, best first by preference; returned in minor order."""
        if len(group) == count:
            return group

        def order(c: _Cand) -> tuple[int, int, int, int]:
            return (
                -_preference(_PCIE, c.state, prefer),
                -(_scope_key(_PCIE, c.state) in used_pcies),
                -c.score,
                c.state.minor,
            )

        return sorted(sorted(group, key=order)[:count], key=lambda c: c.state.minor)

    def _follow_primary(
        self,
        cands: list[_Cand],
        pcies: Sequence[str],
        need: _Need,
        states: Sequence[DeviceState],
        *,
        same_pcie: bool,
    ) -> list[_Cand] | Rejection:
        """A secondary type of a joint allocation (Koordinator's rule, module docstring): up to
        one device per primary switch and at least `need.count`; with `same_pcie`, at least one
        per primary switch and on exactly those switches. GPUs are never spread beyond the count
        asked for: the containers see that many (`nvidia.com/gpu`), unlike an RDMA share."""
        spread = need.type is not DeviceType.GPU
        wanted = max(need.count, len(pcies)) if same_pcie and spread else need.count
        picked = _joint_order(cands, pcies)[: max(wanted, len(pcies)) if spread else wanted]
        if len(picked) < wanted:
            return self._reject(states, replace(need, count=wanted), len(cands))
        if same_pcie and {c.state.pcie for c in picked if c.state.pcie is not None} != set(pcies):
            return Rejection(Code.UNSCHEDULABLE, reasons.JOINT_ALLOCATE_VIOLATION)
        return sorted(picked, key=lambda c: c.state.minor)

    def _joint_pcies(
        self, devices: NodeDevices, joint: JointAllocate, needs: Mapping[DeviceType, _Need]
    ) -> frozenset[str] | Rejection:
        """Switches where every requested secondary type has a candidate (joint SamePCIe); a
        secondary type with no candidate anywhere is rejected as such."""
        allowed: set[str] | None = None
        for dtype in joint.device_types[1:]:
            need = needs.get(dtype)
            if need is None:
                continue
            states = devices.states(dtype)
            cands = self._candidates(devices, states, need)
            if not cands:
                return self._reject(states, need, 0)
            pcies = {c.state.pcie for c in cands if c.state.pcie is not None}
            allowed = pcies if allowed is None else allowed & pcies
        return frozenset(allowed or ())

    def _joint_miss(
        self, devices: NodeDevices, joint: JointAllocate, needs: Mapping[DeviceType, _Need], primary: list[_Cand]
    ) -> Rejection:
        """Why a SamePCIe joint allocation fails where the primary alone fits: Koordinator's
        reason for the primary placed without regard to the others (too few free devices of a
        secondary type, else the rule broken), so both name the same cause."""
        pcies = list(dict.fromkeys(c.state.pcie for c in primary if c.state.pcie is not None))
        for dtype in joint.device_types[1:]:
            need = needs[dtype]
            states = devices.states(dtype)
            found = self._follow_primary(self._candidates(devices, states, need), pcies, need, states, same_pcie=True)
            if isinstance(found, Rejection):
                return found
        return Rejection(Code.UNSCHEDULABLE, reasons.JOINT_ALLOCATE_VIOLATION)

    def _reject(
        self, states: Sequence[DeviceState], need: _Need, candidates: int, cands: list[_Cand] | None = None
    ) -> Rejection:
        """Why the type cannot be served here, and whether an empty node could serve it (with
        `cands`, the candidates, a partition's miss says which partitions and why)."""
        if need.by_partition and cands is not None:
            missed = self._partition(cands, need, states)
            if isinstance(missed, partitions.Miss):
                return Rejection(missed.code, missed.reason, details=(missed.detail,))
        label = need.type.value
        if need.vf_selector is not None and not any(s.has_vfs() for s in states if s.healthy):
            return Rejection(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons.INSUFFICIENT_VFS.format(type=label))
        scoped = candidates >= need.count and need.scope is not None
        reason = (
            reasons.INSUFFICIENT_TOPOLOGY_SCOPED.format(type=label.upper())
            if scoped
            else reasons.INSUFFICIENT_DEVICES.format(type=label)
        )
        code = Code.UNSCHEDULABLE if self._fits_empty(states, need) else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return Rejection(code, reason, _shortfalls(states, need, candidates))

    def _fits_empty(self, states: Sequence[DeviceState], need: _Need) -> bool:
        """Could the node serve `need` if no pod held anything on it?"""
        cands = []
        for s in states:
            if not s.total or (need.selector is not None and not need.selector.matches(s.info.labels)):
                continue
            if any(s.total.get(n, 0) < a for n, a in need.amounts(s).items()):
                continue
            if need.needs_vf(s) and not any(
                g.vfs and (need.vf_selector is None or need.vf_selector.matches(g.labels)) for g in s.info.vf_groups
            ):
                continue
            cands.append(_Cand(s, need.amounts(s), None))
        return self._select(cands, need, (), None) is not None

    # --- score ------------------------------------------------------------------------------------
    def score(self, devices: NodeDevices, request: PodDeviceRequest, allocation: Allocation) -> int:
        names_ = self._names
        width = len(names_)
        total_score = 0
        for dtype in request.requests:
            capacity = [0] * width
            requested = [0] * width  # total − free + what the pod gets
            for s in devices.states(dtype):
                total, used = s.total, s.used
                for i, n in enumerate(names_):
                    cap = total.get(n, 0)
                    if cap:
                        capacity[i] += cap
                        requested[i] += min(used.get(n, 0), cap)
            for a in allocation.devices.get(dtype, ()):
                for i, n in enumerate(names_):
                    requested[i] += a.resources.get(n, 0)
            total_score += self.scoring.score(requested, capacity)
        return total_score


def _cliques(group: list[_Cand], nvlink: Mapping[int, frozenset[int]], count: int) -> list[list[_Cand]]:
    """The largest sets of `group` that NVLink fully connects (maximal cliques of the NVLink
    graph, Bron–Kerbosch with pivoting: cheap for the handful of GPUs a node has) holding at least `count`,
    each in minor order, the sets ordered by their minors — so the choice is deterministic."""
    by_minor = {c.state.minor: c for c in group}
    peers = {m: nvlink.get(m, frozenset()) & by_minor.keys() for m in by_minor}
    found: list[tuple[int, ...]] = []

    def expand(clique: frozenset[int], candidates: set[int], excluded: set[int]) -> None:
        if not candidates and not excluded:
            if len(clique) >= count:
                found.append(tuple(sorted(clique)))
            return
        if len(clique) + len(candidates) < count:
            return
        pivot = max(candidates | excluded, key=lambda m: (len(peers[m] & candidates), -m))
        for m in sorted(candidates - peers[pivot]):
            expand(clique | {m}, candidates & peers[m], excluded & peers[m])
            candidates = candidates - {m}
            excluded = excluded | {m}

    expand(frozenset(), set(by_minor), set())
    return [[by_minor[m] for m in clique] for clique in sorted(found)]


def _used_scopes(states: Sequence[DeviceState]) -> tuple[set[object], set[object]]:
    """PCIe switches and NUMA nodes where some device is held. A device without topology is no
    scope to pack into, so it counts for neither (its placement is left to the device score)."""
    used = [s for s in states if s.holders]
    return {s.pcie for s in used if s.pcie is not None}, {s.numa for s in used if s.numa is not None}


def _preference(level: TopologyScope, state: DeviceState, prefer: _Prefer | None) -> int:
    if prefer is None:
        return 0
    if level is _PCIE and state.pcie is not None and state.pcie in prefer.pcies:
        return 2
    if level is not _NODE and state.numa is not None and state.numa in prefer.numas:
        return 1
    return 0


def _joint_order(cands: Sequence[_Cand], pcies: Sequence[str]) -> list[_Cand]:
    """Koordinator's order for a joint secondary type, so that every primary switch gets a
    device before any gets a second: round k holds the k-th best candidate of each switch in
    `pcies`, best first; candidates on other switches follow, best first. Best: the higher
    device score, then the lower minor."""

    def best(c: _Cand) -> tuple[int, int]:
        return -c.score, c.state.minor

    groups: dict[str, list[_Cand]] = {pcie: [] for pcie in pcies}
    others: list[_Cand] = []
    for c in sorted(cands, key=best):
        group = groups.get(c.state.pcie) if c.state.pcie is not None else None
        (group if group is not None else others).append(c)
    out: list[_Cand] = []
    for k in range(max((len(g) for g in groups.values()), default=0)):
        out += sorted((g[k] for g in groups.values() if k < len(g)), key=best)
    return out + others


def _free_vf(state: DeviceState, selector: LabelSelector | None) -> VirtualFunction | None:
    """The free VF with the lowest bus ID among groups matching the selector."""
    best: VirtualFunction | None = None
    for group in state.info.vf_groups:
        if selector is not None and not selector.matches(group.labels):
            continue
        for vf in group.vfs:
            if vf_key(vf.bus_id, vf.minor) in state.used_vfs:
                continue
            if best is None or (vf.bus_id, vf.minor) < (best.bus_id, best.minor):
                best = vf
    return best


def _allocation(cand: _Cand) -> DeviceAllocation:
    vfs = (VFAllocation(cand.vf.minor, cand.vf.bus_id),) if cand.vf is not None else ()
    return DeviceAllocation(minor=cand.state.minor, resources=dict(cand.amounts), id=cand.state.info.id, vfs=vfs)


def _shortfalls(states: Sequence[DeviceState], need: _Need, candidates: int) -> tuple[Shortfall, ...]:
    """The nearest miss: the device closest to fitting, or the node short of whole devices."""
    if candidates >= need.count:
        return ()  # enough devices, but not within the required scope
    if candidates > 0:
        return (Shortfall("node", f"{need.type.value} devices", candidates, need.count),)
    best: tuple[tuple[int, float], tuple[Shortfall, ...]] | None = None
    subject = need.type.value.upper()
    for s in states:
        if not s.total or (need.selector is not None and not need.selector.matches(s.info.labels)):
            continue
        missing = tuple(
            Shortfall(f"{subject} {s.minor}", n, s.free(n), a) for n, a in need.amounts(s).items() if s.free(n) < a
        )
        if not missing:
            continue
        rank = (len(missing), sum((m.needed - m.free) / m.needed for m in missing if m.needed))
        if best is None or rank < best[0]:
            best = (rank, missing)
    return best[1] if best is not None else ()


class FragmentationAwarePolicy(TopologyAwarePolicy):
    """TopologyAware, except that a share of one GPU goes to the GPU where it costs the target
    workload least usable GPU (FGD's choice within a node, `fragmentation.Demand.loss`): the
    device score is minus that loss and outranks the partly-used-switch preference, which
    then only breaks ties. Whole GPUs are all alike to the measure, so they are placed as
    TopologyAware places them. Without a demand it is TopologyAware."""

    name = "FragmentationAware"
    uses_workload = True
    fit_before_topology = True

    def _score_candidates(self, cands: list[_Cand], need: _Need, states: Sequence[DeviceState]) -> None:
        demand = need.demand
        if demand is None:
            super()._score_candidates(cands, need, states)
            return
        free = fragmentation.gpu_free(states)
        position = {s.minor: i for i, s in enumerate(states)}
        for c in cands:
            take = max(c.amounts.get(names.GPU_CORE, 0), c.amounts.get(names.GPU_MEMORY_RATIO, 0))
            c.score = -demand.loss(free, ((position[c.state.minor], take),))


#: Placement policies by name (DeviceShare's `allocationPolicy` argument).
POLICIES: Mapping[str, Callable[[ScoringStrategy], AllocationPolicy]] = {
    TopologyAwarePolicy.name: TopologyAwarePolicy,
    FragmentationAwarePolicy.name: FragmentationAwarePolicy,
}
