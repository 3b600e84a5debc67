"""GPU nodes, pods holding shares of them, and quotas, as parsed objects: for the dashboard's
tests and its benchmark.

`make_device("n", gpus=4)` is a node whose GPUs sit two per PCIe switch (`pci0000:00` holds
GPUs 0 and 1 and RDMA NIC 0 with 4 VFs, `pci0000:01` GPUs 2 and 3 and NIC 1, ...), 80 GiB each.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping

from apis.crds.device import Device, DeviceInfo, DeviceTopology, DeviceType, VirtualFunction, VirtualFunctionGroup
from apis.crds.elasticquota import ElasticQuota
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.k8s.core import Container, Pod
from apis.k8s.meta import Condition, ObjectMeta

GIB = 1 << 30
GPU_MEMORY = 80 * GIB
NOW = datetime.datetime(2026, 11, 24, 18, 0, 0, tzinfo=datetime.UTC)


def make_device(
    name: str,
    *,
    gpus: int = 4,
    rdma: bool = True,
    unhealthy: Mapping[int, str] | None = None,
    nvlink: Iterable[Iterable[int]] = (),
) -> Device:
    bad = dict(unhealthy or {})
    infos = []
    for minor in range(gpus):
        healthy = minor not in bad
        infos.append(
            DeviceInfo(
                DeviceType.GPU,
                minor,
                health=healthy,
                resources={names.GPU_CORE: 100, names.GPU_MEMORY_RATIO: 100, names.GPU_MEMORY: GPU_MEMORY}
                if healthy
                else {},
                topology=DeviceTopology(pcie_id=f"pci0000:{minor // 2:02d}"),
                conditions=() if healthy else (Condition(names.CONDITION_HEALTHY, "False", reason=bad[minor]),),
            )
        )
    if rdma:
        for minor in range((gpus + 1) // 2):
            vfs = VirtualFunctionGroup(vfs=tuple(VirtualFunction(i) for i in range(4)))
            infos.append(
                DeviceInfo(
                    DeviceType.RDMA,
                    minor,
                    health=True,
                    resources={names.RDMA: 100},
                    topology=DeviceTopology(pcie_id=f"pci0000:{minor:02d}"),
                    vf_groups=(vfs,),
                )
            )
    peers: dict[int, frozenset[int]] = {}
    for group in nvlink:
        members = frozenset(group)
        for m in members:
            peers[m] = members - {m}
    return Device(ObjectMeta(name=name), tuple(infos), nvlink=peers)


def make_pod(
    name: str,
    *,
    namespace: str = "default",
    node: str = "",
    gpus: Mapping[int, int] | None = None,
    rdma_vfs: Mapping[int, int] | None = None,
    requests: Mapping[str, int] | None = None,
    created: str = "2026-11-24T17:59:00Z",
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    phase: str = "",
) -> Pod:
    """A pod; with `node` and `gpus` (minor -> gpu-core percent) it holds those shares (memory
    ratio equal to the core share), with `rdma_vfs` (NIC minor -> VFs) those VFs."""
    ann = dict(annotations or {})
    held: dict[DeviceType, tuple[DeviceAllocation, ...]] = {}
    if gpus:
        held[DeviceType.GPU] = tuple(
            DeviceAllocation(
                minor,
                {names.GPU_CORE: core, names.GPU_MEMORY_RATIO: core, names.GPU_MEMORY: GPU_MEMORY * core // 100},
            )
            for minor, core in gpus.items()
        )
    if rdma_vfs:
        held[DeviceType.RDMA] = tuple(
            DeviceAllocation(minor, {names.RDMA: 1}, vfs=tuple(VFAllocation(i) for i in range(n)))
            for minor, n in rdma_vfs.items()
        )
    if held:
        ann[names.ANNOTATION_DEVICE_ALLOCATED] = allocation.encode(held)
    asks = dict(requests or {})
    return Pod(
        meta=ObjectMeta(
            name=name,
            namespace=namespace,
            uid=f"uid-{name}",
            creation_timestamp=created,
            annotations=ann,
            labels=dict(labels or {}),
        ),
        node_name=node,
        containers=(Container("main", requests=asks, limits=asks),),
        phase=phase or ("Running" if node else "Pending"),
    )


def make_quota(
    name: str,
    *,
    namespace: str = "default",
    min: Mapping[str, int] | None = None,
    max: Mapping[str, int] | None = None,
    used: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> ElasticQuota:
    return ElasticQuota(
        ObjectMeta(name=name, namespace=namespace, labels=dict(labels or {}), annotations=dict(annotations or {})),
        min=dict(min or {}),
        max=dict(max or {}),
        used=dict(used or {}),
    )
