"""Factories for Devices and Nodes as the agent and kubelet write them."""

from __future__ import annotations

from collections.abc import Mapping

from apis.crds.device import Device, DeviceInfo, DeviceType
from apis.extension import names
from apis.k8s.core import Node
from apis.k8s.meta import ObjectMeta

GiB = 1 << 30


NVIDIA_LABELS = {
    names.LABEL_GPU_VENDOR: "nvidia",
    names.LABEL_GPU_MODEL: "A100-SXM4-80GB",
    names.LABEL_GPU_DRIVER_VERSION: "535.161.08",
}


KUBELET = {"cpu": 64_000, "memory": 512 * GiB, "pods": 110}


def make_gpu(minor: int, *, healthy: bool = True, memory: int = 80 * GiB) -> DeviceInfo:
    resources = {names.GPU_CORE: 100, names.GPU_MEMORY: memory, names.GPU_MEMORY_RATIO: 100} if healthy else {}
    return DeviceInfo(DeviceType.GPU, minor, id=f"GPU-{minor}", health=healthy, resources=resources)


def make_rdma(minor: int, *, healthy: bool = True) -> DeviceInfo:
    return DeviceInfo(
        DeviceType.RDMA, minor, id=f"0000:0{minor}:00.0", health=healthy, resources={names.RDMA: 100} if healthy else {}
    )


def make_device(
    name: str = "n1",
    *,
    gpus: int = 8,
    unhealthy: tuple[int, ...] = (),
    rdma: int = 0,
    unhealthy_rdma: tuple[int, ...] = (),
    labels: Mapping[str, str] = NVIDIA_LABELS,
    memory: int = 80 * GiB,
) -> Device:
    devices = [make_gpu(i, healthy=i not in unhealthy, memory=memory) for i in range(gpus)]
    devices += [make_rdma(i, healthy=i not in unhealthy_rdma) for i in range(rdma)]
    return Device(ObjectMeta(name=name, labels=dict(labels), resource_version="5"), tuple(devices))


def make_node(
    name: str = "n1",
    *,
    resources: Mapping[str, int] | None = None,
    capacity: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
    resource_version: str = "10",
) -> Node:
    """A Node as kubelet reports it, plus `resources` in allocatable (and capacity unless given)."""
    allocatable = {**KUBELET, **(resources or {})}
    return Node(
        ObjectMeta(
            name=name,
            uid=f"uid-{name}",
            labels={"kubernetes.io/hostname": name, **(labels or {})},
            resource_version=resource_version,
        ),
        allocatable=allocatable,
        capacity={**KUBELET, **(capacity if capacity is not None else resources or {})},
    )
