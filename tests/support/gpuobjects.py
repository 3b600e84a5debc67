"""GPU nodes, pods holding shares of them, quotas, Reservations and PodMigrationJobs, as parsed
objects (and, for the last two, as the manifests the API server takes): for the dashboard's tests
and its benchmark.

`make_device("n", gpus=4)` is a node whose GPUs sit two per PCIe switch (`pci0000:00` holds
GPUs 0 and 1 and RDMA NIC 0 with 4 VFs, `pci0000:01` GPUs 2 and 3 and NIC 1, ...), 80 GiB each.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from apis.crds.device import Device, DeviceInfo, DeviceTopology, DeviceType, VirtualFunction, VirtualFunctionGroup
from apis.crds.elasticquota import ElasticQuota
from apis.crds.podmigrationjob import PodMigrationJob
from apis.crds.reservation import Reservation
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
        held[DeviceType.GPU] = _gpu_shares(gpus)
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


def _gpu_shares(gpus: Mapping[int, int]) -> tuple[DeviceAllocation, ...]:
    """minor -> gpu-core percent, as allocations (memory ratio alike, memory in proportion)."""
    return tuple(
        DeviceAllocation(
            minor, {names.GPU_CORE: core, names.GPU_MEMORY_RATIO: core, names.GPU_MEMORY: GPU_MEMORY * core // 100}
        )
        for minor, core in gpus.items()
    )


def gpu_allocation(gpus: Mapping[int, int]) -> str:
    """A `device-allocated` annotation holding `gpus` (minor -> gpu-core percent, memory alike)."""
    return allocation.encode({DeviceType.GPU: _gpu_shares(gpus)})


def reservation_manifest(
    name: str,
    *,
    node: str = "",
    phase: str = "",
    gpus: Mapping[int, int] | None = None,
    owner_labels: Mapping[str, str] | None = None,
    ttl: str = "1h",
    created: str = "2026-11-24T17:30:00Z",
    conditions: Sequence[Mapping[str, str]] = (),
    current_owners: Sequence[str] = (),
) -> dict[str, Any]:
    """A Reservation of `gpus` (minor -> percent, whole GPUs as `nvidia.com/gpu` when all are
    100) for pods labelled `owner_labels`; placed on `node` (its `device-allocated` annotation
    naming `gpus`) when `node` is given; `current_owners` as `namespace/name`."""
    held = dict(gpus or {})
    if held and all(core == 100 for core in held.values()):
        limits = {names.NVIDIA_GPU: str(len(held))}
    else:
        core = sum(held.values())
        limits = {names.GPU_CORE: str(core), names.GPU_MEMORY_RATIO: str(core)} if held else {"cpu": "100m"}
    annotations = {names.ANNOTATION_DEVICE_ALLOCATED: gpu_allocation(held)} if node and held else {}
    status: dict[str, Any] = {"phase": phase or ("Available" if node else "Pending")}
    if node:
        status["nodeName"] = node
        status["allocatable"] = dict(limits)
    if conditions:
        status["conditions"] = [dict(c) for c in conditions]
    if current_owners:
        status["currentOwners"] = [
            {"namespace": key.partition("/")[0], "name": key.partition("/")[2]} for key in current_owners
        ]
    return {
        "apiVersion": names.RESERVATIONS.api_version,
        "kind": names.RESERVATIONS.kind,
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": created, "annotations": annotations},
        "spec": {
            "template": {
                "metadata": {"namespace": "default"},
                "spec": {
                    "schedulerName": names.SCHEDULER_NAME,
                    "containers": [{"name": "main", "resources": {"requests": limits, "limits": limits}}],
                },
            },
            "owners": [{"labelSelector": {"matchLabels": dict(owner_labels or {"app": "train"})}}],
            "ttl": ttl,
        },
        "status": status,
    }


def make_reservation(name: str, **fields: Any) -> Reservation:
    """`reservation_manifest(name, **fields)`, parsed."""
    return Reservation.from_dict(reservation_manifest(name, **fields))


def migration_manifest(
    name: str,
    *,
    pod: str = "default/train-0",
    pod_uid: str = "",
    phase: str = "",
    node: str = "",
    reservation: str = "",
    reason: str = "",
    message: str = "",
    created: str = "2026-11-24T17:55:00Z",
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A PodMigrationJob moving `pod` (`namespace/name`), with its status as given."""
    namespace, _, pod_name = pod.partition("/")
    spec: dict[str, Any] = {"podRef": {"namespace": namespace, "name": pod_name}, "mode": "ReservationFirst"}
    if pod_uid:
        spec["podRef"]["uid"] = pod_uid
    if reservation:
        spec["reservationOptions"] = {"reservationRef": {"name": reservation}}
    status = {k: v for k, v in {"phase": phase, "nodeName": node, "reason": reason, "message": message}.items() if v}
    return {
        "apiVersion": names.POD_MIGRATION_JOBS.api_version,
        "kind": names.POD_MIGRATION_JOBS.kind,
        "metadata": {"name": name, "creationTimestamp": created, "annotations": dict(annotations or {})},
        "spec": spec,
        "status": status,
    }


def make_migration(name: str, **fields: Any) -> PodMigrationJob:
    """`migration_manifest(name, **fields)`, parsed."""
    return PodMigrationJob.from_dict(migration_manifest(name, **fields))
