"""What a pod is charged against its quota: its request, with whole GPUs normalised.

Whole and fractional GPU pods draw on the same quota, as DeviceShare normalises them: a pod asking
`nvidia.com/gpu: 2` (or `koordinator.sh/gpu: 2`) is charged `koordinator.sh/gpu-core: 200` and
`koordinator.sh/gpu-memory-ratio: 200`, so a quota can be written in one set of GPU names.
"""

from __future__ import annotations

from collections.abc import Mapping

from apis.extension import names

__all__ = ["quota_capacity", "quota_request"]

_WHOLE_GPU_NAMES = frozenset({*names.WHOLE_GPU_RESOURCES, names.KOORD_GPU})
_PERCENT_PER_GPU = 100


def quota_request(requests: Mapping[str, int]) -> dict[str, int]:
    """The pod's effective request (base units) as its quota is charged: whole GPUs as percent."""
    out = {name: amount for name, amount in requests.items() if name not in _WHOLE_GPU_NAMES and amount}
    gpus = sum(requests.get(name, 0) for name in _WHOLE_GPU_NAMES)
    if gpus:
        for name in (names.GPU_CORE, names.GPU_MEMORY_RATIO):
            out[name] = out.get(name, 0) + gpus * _PERCENT_PER_GPU
    return out


def quota_capacity(allocatable: Mapping[str, int]) -> dict[str, int]:
    """A node's allocatable in the names quotas use: whole GPUs counted as percent of gpu-core
    and gpu-memory-ratio unless the node already advertises those."""
    out = {name: amount for name, amount in allocatable.items() if name not in _WHOLE_GPU_NAMES}
    gpus = sum(allocatable.get(name, 0) for name in _WHOLE_GPU_NAMES)
    for name in (names.GPU_CORE, names.GPU_MEMORY_RATIO):
        if gpus and name not in out:
            out[name] = gpus * _PERCENT_PER_GPU
    return out
