"""How every device resource spelling counts in elastic quotas: one table, applied alike to pods'
requests, to quotas' `min` / `max` / `shared-weight`, and to nodes' allocatable.

A pod may ask for a GPU in many spellings — `nvidia.com/gpu: 1` (also `amd.com/gpu`,
`dcu.com/gpu`), `koordinator.sh/gpu: 100`, `koordinator.sh/gpu-core: 100` with
`gpu-memory-ratio: 100` or with `gpu-memory: 80Gi`, `gpu-memory: 8Gi` alone, any of them with
`gpu.shared`, or Koordinator's deprecated `kubernetes.io/*` names — and a quota may be written in
any of them too. If each spelling were its own quota dimension (as in Koordinator, whose quotas
count the names as written), a quota in `nvidia.com/gpu` would limit nothing a fractional pod
asks, and a tree in one spelling would never see pods of another. So quotas count device
resources in the units Koordinator's DeviceShare normalises every GPU request into
(`ConvertDeviceRequest`):

| a pod (or quota) says | counts as |
| --- | --- |
| `nvidia.com/gpu: N` (`amd.com/gpu`, `dcu.com/gpu`) | `gpu-core: 100·N`, `gpu-memory-ratio: 100·N` |
| `koordinator.sh/gpu: X` (percent of a GPU; `kubernetes.io/gpu`) | `gpu-core: X`, `gpu-memory-ratio: X` |
| `koordinator.sh/gpu-core: C` | `gpu-core: C` |
| `koordinator.sh/gpu-memory-ratio: R` | `gpu-memory-ratio: R` |
| `koordinator.sh/gpu-memory: B` (bytes) | `gpu-memory: B`, and for a pod `gpu-memory-ratio` (below) |
| `koordinator.sh/gpu.shared: S` | nothing itself: it says over how many GPUs the rest is spread |
| `koordinator.sh/rdma: X`, `koordinator.sh/fpga: X` | themselves (percent of a device; 1 = a VF) |
| a deprecated `kubernetes.io/…` name | as the current name it stands for |

Every other resource (cpu, memory, ...) counts as itself. Spellings that land on the same counted
name add up (a quota with `nvidia.com/gpu: 2` and `gpu-core: 100` limits `gpu-core` to 300).

Every valid GPU request holds GPU memory in `gpu-memory-ratio` or in bytes, so every GPU pod
counts in `gpu-memory-ratio`, and a quota in whole GPUs (`nvidia.com/gpu: 4` = 400 of both
percents) limits whole and fractional pods alike. A pod that gives its memory in bytes only
(`gpu-memory`, with or without `gpu-core`) is counted the ratio it takes: once bound, the ratio
its `device-allocated` annotation says it was given; before, what those bytes are of the
smallest GPU in the cluster (`Capacity.gpu_memory`, rounded up, at most 100 per GPU) — never
less than it will take — or a whole GPU per GPU when no GPU is known.

Percent-of-device names split in whole devices first (`GRANULES`): a runtime shared out of a
tree written in whole GPUs stays in whole GPUs (see `apis.quota.runtime`).

The rows of this table are the `counts` of each resource in the device type table
(`apis.extension.devicetypes`); this module applies them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from apis.extension import devicetypes, names

__all__ = [
    "COUNTS",
    "GRANULES",
    "PERCENT_PER_DEVICE",
    "Capacity",
    "capacity_of",
    "counted",
    "estimates_memory_ratio",
    "gpu_memory_of",
    "granule",
    "node_counted",
    "pod_charge",
]

#: One whole device in the percent units of gpu-core, gpu-memory-ratio, rdma and fpga.
PERCENT_PER_DEVICE: Final = devicetypes.PERCENT_PER_DEVICE

#: Every device resource name quotas accept (deprecated spellings included) -> the counted names
#: it adds to, each with the factor its amount is multiplied by: the `counts` of the device type
#: table's rows (`apis.extension.devicetypes`). Names not listed count as themselves.
COUNTS: Final[Mapping[str, tuple[tuple[str, int], ...]]] = MappingProxyType(
    {n: r.counted for s in devicetypes.TABLE for r in s.resources for n in (r.name, r.deprecated) if n}
)
#: Counted names whose runtime is shared out in whole devices first (`apis.quota.runtime`): the
#: percent-of-a-device resources that count as themselves.
GRANULES: Final[Mapping[str, int]] = MappingProxyType(
    {
        r.name: PERCENT_PER_DEVICE
        for s in devicetypes.TABLE
        for r in s.resources
        if r.unit is devicetypes.Unit.PERCENT and r.counted == ((r.name, 1),)
    }
)
#: Names whose presence says the GPU memory is given as a ratio (so bytes need no estimate).
_RATIO_GIVEN: Final = frozenset(
    n for n, counts in COUNTS.items() if any(c == names.GPU_MEMORY_RATIO for c, _ in counts)
)
_BYTES: Final = frozenset(n for n, counts in COUNTS.items() if counts == ((names.GPU_MEMORY, 1),))


def granule(name: str) -> int:
    """The unit a counted resource is shared out in first (1 for most)."""
    return GRANULES.get(name, 1)


def counted(amounts: Mapping[str, int]) -> dict[str, int]:
    """`amounts` (a quota's min, max or shared-weight; a pod's request) in the names quotas count,
    by `COUNTS`. A zero stays (a quota's `max: {nvidia.com/gpu: 0}` limits GPUs to none). No
    estimate for GPU memory given in bytes (`pod_charge`)."""
    out: dict[str, int] = {}
    for name, amount in amounts.items():
        counts = COUNTS.get(name)
        if counts is None:
            out[name] = out.get(name, 0) + amount
            continue
        for into, factor in counts:
            out[into] = out.get(into, 0) + amount * factor
    return out


def estimates_memory_ratio(requests: Mapping[str, int]) -> bool:
    """Whether the request gives GPU memory in bytes only, so its ratio is estimated (or read
    from the pod's allocation once it is bound)."""
    return any(requests.get(n, 0) > 0 for n in _BYTES) and not any(requests.get(n, 0) > 0 for n in _RATIO_GIVEN)


def pod_charge(
    requests: Mapping[str, int], *, allocated_ratio: int | None = None, gpu_memory: int = 0
) -> dict[str, int]:
    """What a pod asking `requests` (its effective request, base units) is charged in its quota:
    `counted(requests)`, plus, for GPU memory given in bytes only, the `gpu-memory-ratio` it
    takes — `allocated_ratio` when its allocation says so, else estimated against a GPU of
    `gpu_memory` bytes (the cluster's smallest; 0: none known, a whole GPU each)."""
    out = {name: amount for name, amount in counted(requests).items() if amount}
    if not estimates_memory_ratio(requests):
        return out
    if allocated_ratio is None:
        gpus = max(1, requests.get(names.GPU_SHARED, 0))
        per_gpu = -(-sum(requests.get(n, 0) for n in _BYTES) // gpus)  # bytes, rounded up as DeviceShare does
        share = -(-per_gpu * PERCENT_PER_DEVICE // gpu_memory) if gpu_memory > 0 else PERCENT_PER_DEVICE
        allocated_ratio = min(share, PERCENT_PER_DEVICE) * gpus
    if allocated_ratio:
        out[names.GPU_MEMORY_RATIO] = out.get(names.GPU_MEMORY_RATIO, 0) + allocated_ratio
    return out


@dataclass(frozen=True, slots=True)
class Capacity:
    """The cluster as quotas see it: the nodes' allocatable in counted names, summed, and the
    memory of its smallest GPU (bytes; 0 when no node has a GPU)."""

    total: Mapping[str, int] = field(default_factory=dict)
    gpu_memory: int = 0


def gpu_memory_of(allocatable: Mapping[str, int]) -> int:
    """Bytes of one GPU of a node (its GPU memory over its GPUs; 0: no GPU advertised)."""
    ratio = allocatable.get(names.GPU_MEMORY_RATIO, 0)
    memory = allocatable.get(names.GPU_MEMORY, 0)
    return memory * PERCENT_PER_DEVICE // ratio if ratio > 0 and memory > 0 else 0


def node_counted(allocatable: Mapping[str, int]) -> dict[str, int]:
    """A node's allocatable counted. A node advertises the same GPUs in several spellings at once
    (`gpu-core: 800`, `koordinator.sh/gpu: 800` as koord-manager and our controller publish
    them, `nvidia.com/gpu: 8` from the device plugin): each spelling is all of them, so a counted
    name takes the largest, never the sum."""
    out: dict[str, int] = {}
    for name, amount in allocatable.items():
        for into, value in counted({name: amount}).items():
            out[into] = max(out.get(into, 0), value)
    return out


def capacity_of(allocatables: Iterable[Mapping[str, int]]) -> Capacity:
    """The cluster's `Capacity` from every node's allocatable."""
    total: dict[str, int] = {}
    smallest = 0
    for allocatable in allocatables:
        for name, amount in node_counted(allocatable).items():
            total[name] = total.get(name, 0) + amount
        memory = gpu_memory_of(allocatable)
        if memory and (not smallest or memory < smallest):
            smallest = memory
    return Capacity(total, smallest)
