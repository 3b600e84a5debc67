"""One ledger on the scheduler's side: what a node's devices already hold, in both protocols, for
the allocator (`held`) — and a claim's devices in Koordinator's terms for the cache, so that
DeviceShare counts them (`gpu_holdings`) — plus where on a node a claim's devices are best put
(`rank`) and how a node scores with them (`node_score`).

The cache counts every pod's GPUs per minor (`NodeDevices`): Koordinator-protocol pods from their
`device-allocated` annotation, pods with claims from their claims' allocations (the holdings
source, `holdings.ClaimHoldings`, by `apis.dra.gpus.koordinator_usage`), so DeviceShare never
gives a GPU a claim holds. The allocator needs the other direction: the claims themselves (the
store's allocated claims) plus what Koordinator pods hold, as DRA devices
(`gpus.held_by_koordinator`). A pod with claims holds its GPUs through them only (PreFilter
refuses a pod asking in both protocols), so the Koordinator part is the GPU holdings of pods
without claims — no claim is counted twice.

Pure: reads a NodeInfo and the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from apis.crds.device import DeviceType
from apis.dra import gpus
from apis.dra.allocation import AllocationResult
from apis.dra.ledger import Held
from apis.dra.slice import ResourceSlice
from apis.extension import names
from apis.extension.allocation import DeviceAllocation
from scheduler.cache import NodeInfo
from scheduler.framework.scoring import ScoringStrategy
from scheduler.plugins.dynamicresources.allocator import Candidate

__all__ = ["gpu_holdings", "koordinator_gpus", "node_score", "rank"]

_GPU_NAMES = (names.GPU_CORE, names.GPU_MEMORY, names.GPU_MEMORY_RATIO)


def koordinator_gpus(node: NodeInfo) -> dict[int, dict[str, int]]:
    """GPU minor -> what pods without claims (Koordinator's protocol, Reservations) hold of it,
    bound and in flight."""
    out: dict[int, dict[str, int]] = {}
    for ident, holding in node.devices.holdings.items():
        allocs = holding.allocations.get(DeviceType.GPU)
        if not allocs:
            continue
        info = node.pods.get(ident)
        if info is not None and info.pod.resource_claims:
            continue  # its GPUs are its claims'
        for alloc in allocs:
            into = out.setdefault(alloc.minor, {})
            for name in _GPU_NAMES:
                into[name] = into.get(name, 0) + alloc.resources.get(name, 0)
    return out


def held(node: NodeInfo, claims: Held, slices: Sequence[ResourceSlice]) -> Held:
    """Everything held of the devices `node` can reach: `claims` (the store's) and the GPUs
    Koordinator-protocol pods hold there."""
    koordinator = koordinator_gpus(node)
    if not koordinator:
        return claims
    return claims + gpus.held_by_koordinator(koordinator, slices, node=node.name)


def gpu_holdings(
    allocations: Iterable[AllocationResult], slices: Iterable[ResourceSlice], *, node: str
) -> tuple[DeviceAllocation, ...]:
    """What claims' allocations hold of each GPU of `node`, as the cache counts a GPU holding."""
    usage = gpus.koordinator_usage(allocations, slices, node=node)
    return tuple(DeviceAllocation(minor, usage[minor]) for minor in sorted(usage))


def rank(node: NodeInfo, *, count: int, shares: bool) -> Callable[[Candidate], Any]:
    """The order in which the allocator tries `node`'s devices: DeviceShare's preferences for
    our GPU driver's devices, kube's order for every other device (a stable sort keeps it).

    - `shares` (a request takes part of a device's capacity): a shareable GPU goes to the
      fullest GPU that takes it first (packing: whole GPUs stay whole for whole-GPU pods, as
      fragmentation-aware placement wants);
    - otherwise (whole devices: a request without capacity takes all of a shareable one) a
      device goes first to a PCIe switch that has `count` unused GPUs (so a pod's devices share
      a switch), then to a partly used switch (topology bin-packing leaves empty switches
      whole), then by switch and minor.
    """
    states = {s.minor: s for s in node.devices.states(DeviceType.GPU)}
    idle: dict[str, int] = {}
    busy: set[str] = set()
    for s in states.values():
        switch = s.pcie or f"gpu-{s.minor}"
        if any(s.used.values()):
            busy.add(switch)
        elif s.total:
            idle[switch] = idle.get(switch, 0) + 1

    def key(candidate: Candidate) -> tuple[Any, ...]:
        if candidate.id.driver != gpus.DRIVER:
            return (1,)
        minor = gpus.minor_of(candidate.device)
        state = states.get(minor) if minor is not None else None
        if state is None:
            return (1,)
        if shares and candidate.shared:
            return (0, 0, -_used(state.used, state.total), minor)
        switch = state.pcie or f"gpu-{state.minor}"
        return (0, 1, idle.get(switch, 0) < count, switch not in busy, switch, minor)

    return key


def _used(used: Mapping[str, int], total: Mapping[str, int]) -> Fraction:
    fractions = [Fraction(used.get(n, 0), total[n]) for n in (names.GPU_CORE, names.GPU_MEMORY_RATIO) if total.get(n)]
    return max(fractions, default=Fraction(0))


def node_score(node: NodeInfo, adding: Mapping[int, Mapping[str, int]], scoring: ScoringStrategy) -> int:
    """The node's device score with `adding` (GPU minor -> resources the pod's claims take), as
    DeviceShare scores a node: the strategy over the GPUs' totals and what is used of them."""
    width = len(scoring.names)
    capacity = [0] * width
    requested = [0] * width
    for s in node.devices.states(DeviceType.GPU):
        for i, name in enumerate(scoring.names):
            cap = s.total.get(name, 0)
            if cap:
                capacity[i] += cap
                requested[i] += min(s.used.get(name, 0), cap) + adding.get(s.minor, {}).get(name, 0)
    return scoring.score(requested, capacity)
