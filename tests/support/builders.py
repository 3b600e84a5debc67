"""Parsed API objects for tests: pods, GPU nodes with their Device, device allocations,
Reservations and ElasticQuotas, built in one line each.

    make_pod("p", gpu_core=50, cpu=1000)           # one container asking for those amounts
    bound_pod("q", "node-a", gpu_alloc(3, 50))      # running on node-a, holding half of GPU 3
    node, device = make_node("node-a")              # an 8-GPU server and its Device
    quota_cr("team-a", min={...}, max={...})        # an ElasticQuota as the API returns it

`make_node("n")` is an 8-GPU server: GPUs 0,1 on switch pci0000:10 and 2,3 on pci0000:30
(NUMA 0), 4,5 on pci0000:50 and 6,7 on pci0000:70 (NUMA 1); RDMA NIC minor k on the k-th
switch with 4 VFs (bus IDs 0000:1f:00.1 … for the first). `tests/support/scheduling.py` puts
them in a scheduler; `tests/support/gpuobjects.py` has the dashboard's objects (pods holding
shares given per GPU, Devices two GPUs to a switch, Reservations and PodMigrationJobs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from apis.crds.device import Device, DeviceType
from apis.crds.elasticquota import ElasticQuota
from apis.crds.reservation import Reservation
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation
from apis.k8s.core import Container, Node, NodeAffinity, Pod, Taint, Toleration
from apis.k8s.meta import ObjectMeta, OwnerReference
from scheduler.simulation.cluster import GIB, NodeShape, gpu_node

__all__ = [
    "GPU_MEMORY",
    "allocated",
    "bound_pod",
    "controlled",
    "gpu_alloc",
    "make_node",
    "make_pod",
    "make_reservation",
    "quota_cr",
    "with_nvlink",
]

GPU_MEMORY = 80 * GIB
_RESOURCE_ARGS = {
    "cpu": names.CPU,
    "memory": names.MEMORY,
    "gpu_core": names.GPU_CORE,
    "gpu_ratio": names.GPU_MEMORY_RATIO,
    "gpu_memory": names.GPU_MEMORY,
    "gpu_shared": names.GPU_SHARED,
    "koord_gpu": names.KOORD_GPU,
    "nvidia_gpu": names.NVIDIA_GPU,
    "rdma": names.RDMA,
    "fpga": names.FPGA,
}


def make_pod(
    name: str = "p",
    *,
    namespace: str = "default",
    node: str = "",
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    tolerations: Iterable[Toleration] = (),
    node_selector: Mapping[str, str] | None = None,
    affinity: NodeAffinity | None = None,
    scheduler_name: str = names.SCHEDULER_NAME,
    extra: Mapping[str, int] | None = None,
    **amounts: int,
) -> Pod:
    """A pod whose one container asks for `amounts` (cpu=milli, memory=bytes, gpu_core=50, ...)."""
    requests = {_RESOURCE_ARGS[k]: v for k, v in amounts.items()}
    requests.update(extra or {})
    return Pod(
        meta=ObjectMeta(
            name=name,
            namespace=namespace,
            uid=f"uid-{namespace}-{name}",
            annotations=dict(annotations or {}),
            labels=dict(labels or {}),
        ),
        scheduler_name=scheduler_name,
        node_name=node,
        containers=(Container("main", requests=requests, limits=dict(requests)),),
        tolerations=tuple(tolerations),
        node_selector=dict(node_selector or {}),
        node_affinity=affinity,
        phase="Running" if node else "Pending",
    )


def make_node(
    name: str = "node-a",
    *,
    taints: Iterable[Taint] = (),
    unschedulable: bool = False,
    **shape: Any,  # NodeShape fields
) -> tuple[Node, Device]:
    node, device = gpu_node(name, NodeShape(**shape))
    node = dataclasses.replace(node, taints=tuple(taints), unschedulable=unschedulable)
    return node, device


def with_nvlink(node: tuple[Node, Device], *groups: Iterable[int]) -> tuple[Node, Device]:
    """`node` whose Device says NVLink joins the GPUs of each group all to all."""
    peers: dict[int, set[int]] = {}
    for group in groups:
        members = set(group)
        for minor in members:
            peers.setdefault(minor, set()).update(members - {minor})
    nvlink = {minor: frozenset(p) for minor, p in peers.items() if p}
    return node[0], dataclasses.replace(node[1], nvlink=nvlink)


def gpu_alloc(minor: int, percent: int = 100, *, memory: int = GPU_MEMORY) -> DeviceAllocation:
    return DeviceAllocation(
        minor=minor,
        resources={
            names.GPU_CORE: percent,
            names.GPU_MEMORY_RATIO: percent,
            names.GPU_MEMORY: memory * percent // 100,
        },
    )


def bound_pod(
    name: str, node: str, *allocs: DeviceAllocation, dtype: DeviceType = DeviceType.GPU, **amounts: int
) -> Pod:
    """A running pod on `node` holding `allocs` (through its device-allocated annotation)."""
    annotations = {names.ANNOTATION_DEVICE_ALLOCATED: allocation.encode({dtype: allocs})} if allocs else {}
    return make_pod(name, node=node, annotations=annotations, **amounts)


def allocated(annotations: Mapping[str, str]) -> dict[str, list[int]]:
    """device type -> minors, from a device-allocated annotation."""
    decoded = allocation.from_pod_annotations(annotations)
    return {t.value: [a.minor for a in allocs] for t, allocs in decoded.items()}


def controlled(pod: Pod) -> Pod:
    """`pod` owned by a ReplicaSet (something that recreates it after an eviction)."""
    ref = OwnerReference("apps/v1", "ReplicaSet", f"rs-{pod.name}", f"rs-uid-{pod.name}", controller=True)
    return dataclasses.replace(pod, meta=dataclasses.replace(pod.meta, owner_references=(ref,)))


def make_reservation(
    name: str = "r",
    *,
    requests: Mapping[str, str],
    owner_labels: Mapping[str, str] | None = None,
    allocate_once: bool = True,
    ttl: str = "1h",
) -> Reservation:
    raw: dict[str, Any] = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "uid": f"uid-r-{name}", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "template": {
                "metadata": {"namespace": "default"},
                "spec": {
                    "schedulerName": names.SCHEDULER_NAME,
                    "containers": [
                        {"name": "main", "resources": {"requests": dict(requests), "limits": dict(requests)}}
                    ],
                },
            },
            "owners": [{"labelSelector": {"matchLabels": dict(owner_labels or {"app": "train"})}}],
            "allocateOnce": allocate_once,
            "ttl": ttl,
        },
    }
    return Reservation.from_dict(raw)


def quota_cr(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    min: dict[str, Any] | None = None,
    max: dict[str, Any] | None = None,
    namespace: str = "default",
) -> ElasticQuota:
    return ElasticQuota.from_dict(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels or {},
                "annotations": annotations or {},
            },
            "spec": {"min": min or {}, "max": max or {}},
        }
    )
