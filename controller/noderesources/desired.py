"""What a node's Device CR says its Node should carry: device resources and GPU labels. Pure.

The scheduler filters nodes on `status.allocatable`, so it must show exactly what the healthy
devices offer (Koordinator's slo-controller does the same from the same CR):

- `koordinator.sh/gpu-core`, `gpu-memory`, `gpu-memory-ratio`: sums over healthy GPUs;
- `koordinator.sh/gpu`: the gpu-core sum, when the GPUs are NVIDIA's or the vendor is not
  labelled (the name is NVIDIA-specific in Koordinator's device plugin compatibility);
- `koordinator.sh/rdma`: 100 per healthy RDMA physical function (VFs are shares of their PF);
- nothing at all for a name no healthy device offers (the Node must not advertise zero-sized or
  stale resources), and nothing when there is no Device CR;
- never a deprecated spelling (`kubernetes.io/gpu-core`, ...): a Device CR written with those
  parses into the current names. What Koordinator's manager before v1.2 published under them on
  the Node is not ours and is left alone, as Koordinator leaves it: a real kubelet admits a pod in
  the old names against them, and the scheduler reads the current name where both are present;
- labels `node.koordinator.sh/gpu-vendor`, `gpu-model`, `gpu-driver-version` as the Device CR
  carries them (absent from the CR: absent from the Node);
- `koordinator.sh/gpu-isolation-provider` when the Device CR carries it (the agent found HAMi-core's
  library on the node), but never removed: Koordinator's manual has operators set that label by
  hand, and an agent that does not see the library (told another path) must not take a label the
  operator put there. A node whose library is gone keeps the label until someone removes it; its
  agent then refuses the pods that ask for HAMi-core, saying why.

A Device whose healthy GPU does not say what it offers is refused with a ValidationError naming
the device and the resource, instead of being summed into a wrong number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from apis.crds.device import Device, DeviceInfo, DeviceType
from apis.errors import ValidationError
from apis.extension import names

__all__ = [
    "GPU_RESOURCES",
    "MANAGED_LABELS",
    "MANAGED_RESOURCES",
    "PUBLISHED_LABELS",
    "RDMA_PER_PF",
    "DeviceResources",
    "from_device",
]

#: What each healthy GPU must carry, and what is summed over them.
GPU_RESOURCES: Final = (names.GPU_CORE, names.GPU_MEMORY, names.GPU_MEMORY_RATIO)
#: Every resource name this controller owns on a Node; it never touches any other.
MANAGED_RESOURCES: Final = (*GPU_RESOURCES, names.KOORD_GPU, names.RDMA)
#: Every label key this controller owns on a Node.
MANAGED_LABELS: Final = (names.LABEL_GPU_VENDOR, names.LABEL_GPU_MODEL, names.LABEL_GPU_DRIVER_VERSION)
#: Label keys this controller sets on a Node from the Device CR, but never removes (see above).
PUBLISHED_LABELS: Final = (names.LABEL_GPU_ISOLATION_PROVIDER,)
RDMA_PER_PF: Final = 100
#: Vendors whose GPUs are also offered as `koordinator.sh/gpu` ("" = not labelled).
_KOORD_GPU_VENDORS: Final = frozenset({"", "nvidia"})


@dataclass(frozen=True, slots=True)
class DeviceResources:
    """The managed part of a Node, as it should be. A name or key not present must be absent."""

    resources: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    healthy_gpus: int = 0
    healthy_rdma: int = 0


def from_device(device: Device | None) -> DeviceResources:
    """The resources and labels `device` gives its Node (None: the Node has no Device CR).

    Raises ValidationError when a healthy GPU lacks one of GPU_RESOURCES or carries a
    non-positive amount of it.
    """
    if device is None:
        return DeviceResources()
    gpus = [d for d in device.of_type(DeviceType.GPU) if d.health]
    for gpu in gpus:
        _check_gpu(gpu, device.node_name)
    rdma = sum(1 for d in device.of_type(DeviceType.RDMA) if d.health)
    totals: dict[str, int] = {}
    if gpus:
        totals = {name: sum(g.resources[name] for g in gpus) for name in GPU_RESOURCES}
        if device.meta.labels.get(names.LABEL_GPU_VENDOR, "").lower() in _KOORD_GPU_VENDORS:
            totals[names.KOORD_GPU] = totals[names.GPU_CORE]
    if rdma:
        totals[names.RDMA] = RDMA_PER_PF * rdma
    labels = {key: device.meta.labels[key] for key in (*MANAGED_LABELS, *PUBLISHED_LABELS) if key in device.meta.labels}
    return DeviceResources(totals, labels, healthy_gpus=len(gpus), healthy_rdma=rdma)


def _check_gpu(gpu: DeviceInfo, node: str) -> None:
    for name in GPU_RESOURCES:
        amount = gpu.resources.get(name)
        if amount is None or amount <= 0:
            got = "nothing" if amount is None else str(amount)
            raise ValidationError(
                f"spec.devices[type=gpu,minor={gpu.minor}].resources[{name}]",
                f"a healthy GPU must offer a positive amount, got {got}",
                obj=f"device {node}",
            )
