"""The GPU partition table the agent writes on its Device (`scheduling.koordinator.sh/gpu-partitions`).

Koordinator leaves the table to the node side (koordlet copies it from a vendor's P2P links) and
keeps a built-in one in its scheduler for Hopper nodes whose model label is exactly `H100`,
`H800` or `H20`. NVML's names are longer (`H100-80GB-HBM3`), so that built-in table rarely
applies to a node as labelled; the agent writes it itself instead. Pure, from the inventory:

- **Known models**: eight GPUs, minors 0-7, of an NVIDIA Hopper model Koordinator's table is
  for (a model label that is `H100`, `H800` or `H20`, alone or followed by `-…`; `H200` is
  not one) get the built-in table (`apis.extension.partitions.HOPPER_TABLE`).
- **From NVLink** (Tessera's rule; NVML reports only which GPUs NVLink joins): every GPU alone;
  within each group NVLink joins all to all (an NVSwitch board, a bridged pair), the aligned
  runs of 2, 4, 8, … GPUs in minor order, and the whole group; within a group NVLink joins only
  partly, each linked pair. `gpuLinkType: NVLink`, `allocationScore: 1` (one tier, so the
  scheduler's bin-packing alone chooses).
- Otherwise (no NVLink, unknown model) no table: the node places GPUs by topology alone.

The policy label (`node.koordinator.sh/gpu-partition-policy`) comes with a table, from the
agent's `--gpu-partition-policy` (`Prefer` by default, as koordlet labels a node with P2P links;
`Honor` where only the table's sets may be used, e.g. SharedNVSwitch virtual machines).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from agent.discovery.model import GPU
from apis.extension import names, partitions
from apis.extension.partitions import GPUPartition, PartitionTable

__all__ = ["table_for"]

_HOPPER_MODEL: Final = re.compile(r"(H100|H800|H20)(-.*)?")


def table_for(gpus: Sequence[GPU]) -> PartitionTable | None:
    """The table to write for these GPUs, or None (module docstring)."""
    if _known_hopper(gpus):
        return partitions.HOPPER_TABLE
    return _from_nvlink(gpus)


def _known_hopper(gpus: Sequence[GPU]) -> bool:
    return (
        sorted(g.minor for g in gpus) == list(range(8))
        and all(g.vendor == names.GPU_VENDOR_NVIDIA for g in gpus)
        and len({g.model for g in gpus}) == 1
        and _HOPPER_MODEL.fullmatch(gpus[0].model) is not None
    )


def _from_nvlink(gpus: Sequence[GPU]) -> PartitionTable | None:
    minors = {g.minor for g in gpus}
    peers: dict[int, set[int]] = {m: set() for m in minors}
    for g in gpus:
        for p in g.nvlink_peers:
            if p in minors and p != g.minor:
                peers[g.minor].add(p)
                peers[p].add(g.minor)
    if not any(peers.values()):
        return None
    by_count: dict[int, list[GPUPartition]] = {1: [_partition((m,)) for m in sorted(minors)]}
    seen: set[int] = set()
    for start in sorted(minors):
        if start in seen or not peers[start]:
            continue
        group = _component(start, peers)
        seen |= group
        members = sorted(group)
        if all(peers[m] >= group - {m} for m in members):
            size = 2
            while size <= len(members):
                for i in range(0, len(members) - size + 1, size):
                    by_count.setdefault(size, []).append(_partition(tuple(members[i : i + size])))
                size *= 2
            if size // 2 != len(members):
                by_count.setdefault(len(members), []).append(_partition(tuple(members)))
        else:
            pairs = sorted((a, b) for a in members for b in peers[a] if a < b)
            by_count.setdefault(2, []).extend(_partition(p) for p in pairs)
    return PartitionTable.of(by_count)


def _component(start: int, peers: dict[int, set[int]]) -> set[int]:
    group, stack = {start}, [start]
    while stack:
        for p in peers[stack.pop()]:
            if p not in group:
                group.add(p)
                stack.append(p)
    return group


def _partition(minors: tuple[int, ...]) -> GPUPartition:
    return GPUPartition(minors, partitions.NVLINK, None, 1)
