"""Which GPU partition a multi-GPU pod gets on a node: Koordinator's `allocateByPartition`, pure.

Asked by `TopologyAwarePolicy` for a request of whole GPUs (a share is placed as without
partitions, as in Koordinator) on a node with partitions (`NodePartitions`, resolved by the
cache from the Device and the Node):

- The partitions bind the pod (`honor`) when the node's policy is `Honor` or the pod has a
  `gpu-partition-spec`. Bound, the pod gets one of the table's partitions of exactly its GPU
  count or does not fit: no table ("node(s) missing GPU Partition Table") or no entry for the
  count ("node(s) Unsupported number of GPU requests") can never change, so no preemption is
  tried; no free partition ("Insufficient Partitioned GPU Devices") may change. Not bound
  (`Prefer`), a free partition is taken when there is one, else the GPUs are placed as without
  partitions.
- Tiers: the count's partitions grouped by `allocationScore`, in Koordinator's order
  (`PartitionTable.tiers`). The first tier with a free partition is used; with
  `allocatePolicy: Restricted` only the first tier is looked at. A partition is free when every
  GPU of it is a candidate (healthy, unused, not over-committed, allowed by the pod's hints) and,
  when the pod asks for a `ringBusBandwidth`, the partition offers at least that.
- Among free partitions of the tier, Koordinator's bin-packing: the one that leaves the most of
  the larger partitions whole — for each of the sizes 8, 4 and 2 not below the request, the
  first-tier partitions of that size still free once it is taken, weighted 10000, 100 and 1 and
  by their `allocationScore` — the earlier in the table on a tie.

Beyond Koordinator, a rejection carries a second reason naming the partitions of the count and
what keeps each from the pod, for `tessera explain` and the pod's condition.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from apis.extension import names
from apis.extension.partitions import GPUPartition, NodePartitions, PartitionSpec
from scheduler.framework.status import Code
from scheduler.plugins.deviceshare import reasons

__all__ = ["Choice", "Miss", "choose"]

#: Koordinator's bin-packing weights by partition size.
_PACK_WEIGHTS = ((8, 10000), (4, 100), (2, 1))
#: At most this many partitions are named in a rejection's detail.
_DETAIL_LIMIT = 8


@dataclass(frozen=True, slots=True)
class Choice:
    """The partition the pod gets."""

    partition: GPUPartition


@dataclass(frozen=True, slots=True)
class Miss:
    """The pod does not fit a partition here (and the partitions bind it)."""

    code: Code
    reason: str
    detail: str


def choose(
    node: NodePartitions | None,
    spec: PartitionSpec | None,
    count: int,
    *,
    candidates: Collection[int],
    taken: Collection[int],
    why_not: Mapping[int, str],
) -> Choice | Miss | None:
    """The partition for `count` whole GPUs, a `Miss` when the partitions bind the pod and none
    fits, or None to place the GPUs as without partitions. `candidates`: GPUs the pod could
    have; `taken`: GPUs no pod can have now (held, unhealthy, over-committed), for bin-packing;
    `why_not`: minor -> why a GPU is not a candidate, for the detail."""
    honor = spec is not None or (node is not None and node.honor)
    if not honor and (node is None or node.table is None):
        return None
    policy = _describe(node, spec)
    table = node.table if node is not None else None
    if table is None:
        detail = f"the node has no GPU partition table ({names.ANNOTATION_GPU_PARTITIONS}), {policy}"
        return Miss(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons.MISSING_PARTITION_TABLE, detail)
    if not table.of_size(count):
        if not honor:
            return None
        sizes = ", ".join(str(n) for n in table.sizes()) or "none"
        detail = f"the node's partitions ({node.source if node else ''}) hold {sizes} GPUs, not {count}; {policy}"
        return Miss(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons.UNSUPPORTED_GPU_COUNT, detail)
    wanted_bandwidth = spec.ring_bus_bandwidth if spec is not None else None
    restricted = spec is not None and spec.restricted
    free: list[GPUPartition] = []
    blocked: list[str] = []
    for tier in table.tiers(count):
        for p in tier:
            missing = [m for m in p.minors if m not in candidates]
            if missing:
                blocked.append(f"{p} {why_not.get(missing[0], f'GPU {missing[0]} is not free')}")
            elif wanted_bandwidth is not None and (
                p.ring_bus_bandwidth is None or p.ring_bus_bandwidth < wanted_bandwidth
            ):
                offered = p.ring_bus_bandwidth if p.ring_bus_bandwidth is not None else "no"
                blocked.append(f"{p} offers {offered} ringBusBandwidth, below {wanted_bandwidth}")
            else:
                free.append(p)
        if free or restricted:
            break
    if free:
        return Choice(_bin_pack(free, node, count, taken) if node is not None else free[0])
    if not honor:
        return None
    shown = "; ".join(blocked[:_DETAIL_LIMIT]) + (" …" if len(blocked) > _DETAIL_LIMIT else "")
    tiers = " (first tier only: Restricted)" if restricted and len(table.tiers(count)) > 1 else ""
    detail = f"{count}-GPU partitions{tiers} ({node.source if node else ''}, {policy}): {shown}"
    return Miss(Code.UNSCHEDULABLE, reasons.INSUFFICIENT_PARTITIONED, detail)


def _describe(node: NodePartitions | None, spec: PartitionSpec | None) -> str:
    """Why the partitions bind the pod, or that they are only preferred."""
    if spec is not None:
        return f"binding for the pod ({names.ANNOTATION_GPU_PARTITION_SPEC}, {spec.allocate_policy.value})"
    policy = node.policy.value if node is not None else "Prefer"
    return f"{names.LABEL_GPU_PARTITION_POLICY}={policy}"


def _bin_pack(free: list[GPUPartition], node: NodePartitions, count: int, taken: Collection[int]) -> GPUPartition:
    """Koordinator's `selectPartitionByBinPack` (module docstring)."""
    if len(free) == 1 or node.table is None:
        return free[0]
    used = frozenset(taken)
    best, best_score = free[0], -1
    for p in free:
        after = used | frozenset(p.minors)
        score = 0
        for size, weight in _PACK_WEIGHTS:
            if size < count:
                continue
            tiers = node.table.tiers(size)
            if not tiers:
                continue
            score += sum(weight * q.allocation_score for q in tiers[0] if after.isdisjoint(q.minors))
        if score > best_score:
            best, best_score = p, score
    return best
