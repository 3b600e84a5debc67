"""What a node's Device CR says its Node should carry: device resources and GPU labels. Pure.

The scheduler filters nodes on `status.allocatable`, so it must show exactly what the healthy
devices offer (Koordinator's slo-controller does the same from the same CR). What each device type
adds is its row's `allocatable` in the device type table (`apis.extension.devicetypes`):

- `koordinator.sh/gpu-core`, `gpu-memory`, `gpu-memory-ratio`: sums over healthy GPUs;
- `koordinator.sh/gpu`: the gpu-core sum, when the GPUs are NVIDIA's or the vendor is not
  labelled (the name is NVIDIA-specific in Koordinator's device plugin compatibility);
- `koordinator.sh/rdma`: 100 per healthy RDMA physical function (VFs are shares of their PF);
- nothing for FPGAs (as Koordinator's manager);
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

A Device whose healthy GPU does not say what it offers (a positive amount of each summed name)
is refused with a ValidationError naming the device and the resource, instead of being summed
into a wrong number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from apis.crds.device import Device, DeviceInfo, DeviceType
from apis.errors import ValidationError
from apis.extension import devicetypes, names

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
GPU_RESOURCES: Final = devicetypes.spec(DeviceType.GPU).allocatable.summed
#: Every resource name this controller owns on a Node (what the device type table publishes);
#: it never touches any other.
MANAGED_RESOURCES: Final = tuple(n for row in devicetypes.TABLE for n in row.allocatable.names)
#: Every label key this controller owns on a Node.
MANAGED_LABELS: Final = (names.LABEL_GPU_VENDOR, names.LABEL_GPU_MODEL, names.LABEL_GPU_DRIVER_VERSION)
#: Label keys this controller sets on a Node from the Device CR, but never removes (see above).
PUBLISHED_LABELS: Final = (names.LABEL_GPU_ISOLATION_PROVIDER,)
RDMA_PER_PF: Final = dict(devicetypes.spec(DeviceType.RDMA).allocatable.per_device)[names.RDMA]


@dataclass(frozen=True, slots=True)
class DeviceResources:
    """The managed part of a Node, as it should be. A name or key not present must be absent."""

    resources: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    healthy_gpus: int = 0
    healthy_rdma: int = 0


def from_device(device: Device | None) -> DeviceResources:
    """The resources and labels `device` gives its Node (None: the Node has no Device CR).

    Raises ValidationError when a healthy device lacks one of the names its type sums (a GPU:
    GPU_RESOURCES) or carries a non-positive amount of it.
    """
    if device is None:
        return DeviceResources()
    totals: dict[str, int] = {}
    healthy: dict[DeviceType, int] = {}
    vendor = device.meta.labels.get(names.LABEL_GPU_VENDOR, "").lower()
    for row in devicetypes.TABLE:
        offered = row.allocatable
        if not offered.names:
            continue
        devices = [d for d in device.of_type(row.type) if d.health]
        healthy[row.type] = len(devices)
        if not devices:
            continue
        for dev in devices:
            _check_offers(dev, offered.summed, device.node_name)
        summed = {name: sum(d.resources[name] for d in devices) for name in offered.summed}
        totals.update(summed)
        if offered.alias and vendor in offered.alias_vendors:
            totals[offered.alias] = summed[offered.summed[0]]
        for name, amount in offered.per_device:
            totals[name] = amount * len(devices)
    labels = {key: device.meta.labels[key] for key in (*MANAGED_LABELS, *PUBLISHED_LABELS) if key in device.meta.labels}
    return DeviceResources(
        totals, labels, healthy_gpus=healthy.get(DeviceType.GPU, 0), healthy_rdma=healthy.get(DeviceType.RDMA, 0)
    )


def _check_offers(dev: DeviceInfo, summed: tuple[str, ...], node: str) -> None:
    for name in summed:
        amount = dev.resources.get(name)
        if amount is None or amount <= 0:
            got = "nothing" if amount is None else str(amount)
            raise ValidationError(
                f"spec.devices[type={dev.type.value},minor={dev.minor}].resources[{name}]",
                f"a healthy {dev.type.value.upper()} must offer a positive amount, got {got}",
                obj=f"device {node}",
            )
