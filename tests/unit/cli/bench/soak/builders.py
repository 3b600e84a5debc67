"""Hand-built cluster states for the soak's invariant tests: nodes with Device CRs, pods bound
to given devices, quotas — the objects the API server would hold, parsed as the soak parses them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from apis.crds.device import Device, DeviceInfo, DeviceType
from apis.crds.elasticquota import ElasticQuota
from apis.crds.podmigrationjob import PodMigrationJob
from apis.crds.reservation import Reservation, reservation_allocated_annotation
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.k8s.core import Node, Pod
from cli.bench.soak.state import ClusterState
from cli.launchers.scheduler import node_manifest, pod_manifest
from scheduler.simulation.cluster import NodeShape, gpu_node

NOW = 1_000_000.0
WHOLE = {names.GPU_CORE: 100, names.GPU_MEMORY_RATIO: 100}
HALF = {names.GPU_CORE: 50, names.GPU_MEMORY_RATIO: 50}
GPU = {names.NVIDIA_GPU: "1"}


def node(name: str = "n1", gpus: int = 8, unhealthy: Sequence[int] = ()) -> tuple[Node, Device]:
    """A node with `gpus` healthy GPUs (minus `unhealthy`, which have no resources, as the agent
    writes them) and one RDMA NIC with 4 VFs per PCIe switch."""
    built, device = gpu_node(name, NodeShape(gpus=gpus))
    infos = tuple(
        DeviceInfo(type=d.type, minor=d.minor, id=d.id, health=False, resources={}, topology=d.topology)
        if d.type is DeviceType.GPU and d.minor in unhealthy
        else d
        for d in device.devices
    )
    parsed = Node.from_dict(node_manifest(built))
    return parsed, Device(meta=device.meta, devices=infos, nvlink=device.nvlink)


def pod(
    name: str,
    requests: Mapping[str, str] | None = None,
    *,
    node_name: str = "",
    gpus: Mapping[int, Mapping[str, int]] | None = None,
    vfs: Mapping[int, Sequence[int]] | None = None,
    namespace: str = "soak",
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    uid: str = "",
    deleting: bool = False,
) -> Pod:
    """A pod asking for `requests`; bound to `node_name` holding `gpus` (minor → resources) and
    RDMA `vfs` (NIC minor → VF minors) when given."""
    ann = dict(annotations or {})
    held: dict[DeviceType, tuple[DeviceAllocation, ...]] = {}
    if gpus:
        held[DeviceType.GPU] = tuple(DeviceAllocation(m, dict(r)) for m, r in gpus.items())
    if vfs:
        held[DeviceType.RDMA] = tuple(
            DeviceAllocation(nic, {names.RDMA: 1}, vfs=tuple(VFAllocation(v) for v in minors))
            for nic, minors in vfs.items()
        )
    if held:
        ann[names.ANNOTATION_DEVICE_ALLOCATED] = allocation.encode(held)
    raw: dict[str, Any] = pod_manifest(
        name,
        requests or {names.NVIDIA_GPU: "1"},
        namespace=namespace,
        annotations=ann,
        labels=labels,
        node_name=node_name,
    )
    raw["metadata"]["uid"] = uid or f"uid-{name}"
    raw["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    if deleting:
        raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    return Pod.from_dict(raw)


def quota(name: str, max_: Mapping[str, str], *, used: Mapping[str, str] | None = None) -> ElasticQuota:
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": name},
        "spec": {"min": dict(max_), "max": dict(max_)},
        "status": {"used": dict(used)} if used else {},
    }
    return ElasticQuota.from_dict(raw)


def state(
    pods: Sequence[Pod] = (),
    nodes: Sequence[tuple[Node, Device]] = (),
    **record: Any,
) -> ClusterState:
    """A state at NOW; `record` sets the soak's own fields (acknowledged, deleted, created, ...)."""
    built = nodes or (node(),)
    return ClusterState(
        now=NOW,
        pods=tuple(pods),
        nodes=tuple(n for n, _ in built),
        devices=tuple(d for _, d in built),
        **record,
    )


def reservation(
    name: str,
    *,
    node_name: str = "n1",
    gpus: Mapping[int, Mapping[str, int]] | None = None,
    phase: str = "Available",
    owner_label: str = "",
    ttl: str = "1h",
    created: str = "2026-01-01T00:00:00Z",
    allocate_once: bool = True,
    current_owners: Sequence[str] = (),
) -> Reservation:
    """A Reservation placed on `node_name` holding `gpus` (as the scheduler annotates it), owned by
    pods labelled `owner: OWNER_LABEL` (default: its name)."""
    annotations = {}
    if gpus:
        held = {DeviceType.GPU: tuple(DeviceAllocation(m, dict(r)) for m, r in gpus.items())}
        annotations[names.ANNOTATION_DEVICE_ALLOCATED] = allocation.encode(held)
    raw: dict[str, Any] = {
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": created, "annotations": annotations},
        "spec": {
            "template": {
                "metadata": {"namespace": "soak"},
                "spec": pod_manifest(name, {names.NVIDIA_GPU: "1"})["spec"],
            },
            "owners": [{"labelSelector": {"matchLabels": {"owner": owner_label or name}}}],
            "ttl": ttl,
            "allocateOnce": allocate_once,
        },
        "status": {
            "phase": phase,
            "nodeName": node_name if phase != "Pending" else "",
            "currentOwners": [{"namespace": "soak", "name": o} for o in current_owners],
        },
    }
    return Reservation.from_dict(raw)


def on_reservation(p: Pod, r: Reservation) -> Pod:
    """`p` as the scheduler leaves a pod it placed onto `r`."""
    annotations = {**p.meta.annotations, names.ANNOTATION_RESERVATION_ALLOCATED: reservation_allocated_annotation(r)}
    return dataclasses.replace(p, meta=dataclasses.replace(p.meta, annotations=annotations))


def migration(
    name: str,
    conditions: Mapping[str, tuple[str, str]] = {},
    *,
    mode: str = "ReservationFirst",
    phase: str = "Running",
    created: str = "2026-01-01T00:00:00Z",
    ttl: str = "90s",
) -> PodMigrationJob:
    """A PodMigrationJob with `conditions` (type → (status, lastTransitionTime))."""
    raw = {
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": created},
        "spec": {"podRef": {"namespace": "soak", "name": "infer-a-1"}, "mode": mode, "ttl": ttl},
        "status": {
            "phase": phase,
            "conditions": [{"type": t, "status": s, "lastTransitionTime": at} for t, (s, at) in conditions.items()],
        },
    }
    return PodMigrationJob.from_dict(raw)
