"""Koordinator's deprecated device resource names, read as the current ones.

Before v1.2 Koordinator spelled its device resources `kubernetes.io/gpu-core`,
`kubernetes.io/gpu-memory`, `kubernetes.io/gpu-memory-ratio` (also `kubernetes.io/gpu`, `rdma`,
`fpga`); its scheduler still accepts them, renaming each to the `koordinator.sh/` name in its
informers (`pkg/util/transformer`: pods' container requests, limits and overhead, the resources
of device-allocated annotations, Device CRs, Node allocatable and capacity). Tessera does the
same once, where `apis` parses those objects (`Container`, `Pod`, `Node`, `Device`,
`allocation.decode`), so everything past the parse boundary knows only the current names and a
pod asking for `kubernetes.io/gpu-core: 50` schedules, shares and is accounted exactly like one
asking for `koordinator.sh/gpu-core: 50`.

The rule is Koordinator's, per resource list: a deprecated name is renamed unless the list also
has its current name; then the current amount counts and the deprecated entry stays under its own
name (nothing is added up). Such a leftover is one resource asked for twice in one container;
`devicerequest` refuses it with a message naming both spellings (`shadowed`), where Koordinator
would leave the pod pending on a resource no node offers.

The node labels of that time, `kubernetes.io/gpu-model` and `kubernetes.io/gpu-driver`, became
`node.koordinator.sh/gpu-model` and `gpu-driver-version`. Koordinator keeps the old names as
constants but reads neither; Tessera reads a node's model from the old label when the current one
is absent (`gpu_model`), so a rule about models (DeviceShare's `gpuShareUnsupportedModels`, the
shared-resource templates) also holds on a node a pre-v1.2 manager labelled. The driver label
has no reader in Tessera, old or new.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from apis.extension import devicetypes, names

__all__ = ["gpu_model", "shadowed", "to_current"]

_DEPRECATED: Final = frozenset(devicetypes.DEPRECATED_NAMES)


def to_current(resources: Mapping[str, int]) -> Mapping[str, int]:
    """`resources` with every deprecated device name renamed to its current name (see the module
    for a name given in both spellings). Returns `resources` itself when it has no deprecated name,
    which is nearly always: parsing pays one set test per resource list."""
    if _DEPRECATED.isdisjoint(resources):
        return resources
    out: dict[str, int] = {}
    for name, amount in resources.items():
        current = devicetypes.DEPRECATED_NAMES.get(name)
        out[current if current is not None and current not in resources else name] = amount
    return out


def shadowed(resources: Mapping[str, int]) -> dict[str, str]:
    """Deprecated names that stand beside their current name (deprecated -> current): what
    `to_current` left, because the same resource was given in both spellings."""
    if _DEPRECATED.isdisjoint(resources):
        return {}
    return {
        name: current
        for name, current in devicetypes.DEPRECATED_NAMES.items()
        if name in resources and current in resources
    }


def gpu_model(labels: Mapping[str, str]) -> str:
    """A node's GPU model from its labels: `node.koordinator.sh/gpu-model`, else the deprecated
    `kubernetes.io/gpu-model`, else ""."""
    current = labels.get(names.LABEL_GPU_MODEL)
    if current is not None:
        return current
    return labels.get(names.DEPRECATED_LABEL_GPU_MODEL, "")
