"""`tessera up --demo`: a sample workload a person recognises, and where it went.

Pods in the namespace `tessera-demo` asking for whole GPUs, shares of one GPU, a GPU with an
RDMA NIC on the same PCIe switch (`device-joint-allocate`), one pod no node can hold, and two
gangs (all or nothing): 2 workers × 1 GPU that bind together, and 4 workers × 4 GPUs that the
GPUs left cannot hold, shown pending with the gang's reason. They
are submitted through the API server like any user's pods; the scheduler places them; the table
shows each pod's node, its GPUs (marked `(NVLink)` when NVLink joins them all, as the node's
Device CR says) and RDMA devices from the `device-allocated` annotation the scheduler wrote, or
the reason it is pending from its `PodScheduled` condition.

Submitting is idempotent (fixed names; a pod that exists is kept), so `tessera up --demo` on a
data directory that has them shows the same pods again rather than duplicates.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from apis.crds.device import Device, DeviceType
from apis.errors import AnnotationError, TesseraError
from apis.extension import allocation, names
from apis.k8s import resources
from apis.k8s.core import Node, Pod
from cli.launchers.scheduler import pod_manifest
from kube import errors
from kube.client import Client
from kube.informer import Informer
from kube.resources import NAMESPACES, NODES, PODS

__all__ = [
    "DEMO_PODS",
    "NAMESPACE",
    "DemoPod",
    "Placement",
    "Watched",
    "placements",
    "render",
    "submit",
    "wait_nodes_ready",
    "wait_placed",
]

NAMESPACE: Final = "tessera-demo"
_PART_OF: Final = {"app.kubernetes.io/part-of": "tessera-demo"}


@dataclass(frozen=True, slots=True)
class DemoPod:
    name: str
    #: What it asks for, in words, for the table.
    asks: str
    requests: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: No node can hold it: the demo is done when it has its reason, not a node.
    unschedulable: bool = False

    def manifest(self) -> dict[str, Any]:
        return pod_manifest(
            self.name, self.requests, namespace=NAMESPACE, annotations=self.annotations, labels=_PART_OF
        )


def _gang(name: str, members: int) -> dict[str, str]:
    """A Strict gang of `members`, all or nothing (Koordinator's lightweight gang annotations)."""
    return {names.ANNOTATION_GANG_NAME: name, names.ANNOTATION_GANG_MIN_AVAILABLE: str(members)}


_JOINT_GPU_RDMA: Final = json.dumps({"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"})

DEMO_PODS: Final = (
    DemoPod("train-2gpu", "2 whole GPUs", {names.NVIDIA_GPU: "2"}),
    DemoPod("infer-half-a", "half a GPU", {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}),
    DemoPod("infer-half-b", "half a GPU", {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}),
    DemoPod("notebook-10g", "10 GiB of GPU memory", {names.GPU_MEMORY: "10Gi"}),
    DemoPod(
        "mpi-worker",
        "1 GPU + an RDMA VF on its PCIe switch",
        {names.NVIDIA_GPU: "1", names.RDMA: "1"},
        {names.ANNOTATION_DEVICE_JOINT_ALLOCATE: _JOINT_GPU_RDMA},
    ),
    DemoPod("too-big", "16 whole GPUs", {names.NVIDIA_GPU: "16"}, unschedulable=True),
    *(DemoPod(f"ddp-{i}", "gang ddp: 2 × 1 GPU", {names.NVIDIA_GPU: "1"}, _gang("ddp", 2)) for i in range(2)),
    *(
        DemoPod(f"big-{i}", "gang big: 4 × 4 GPUs", {names.NVIDIA_GPU: "4"}, _gang("big", 4), unschedulable=True)
        for i in range(4)
    ),
)


def submit(client: Client, pods: Sequence[DemoPod] = DEMO_PODS) -> int:
    """Create the namespace and the pods that do not exist yet; the number created."""
    with contextlib.suppress(errors.AlreadyExists):
        client.resource(NAMESPACES).create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    created = 0
    for pod in pods:
        try:
            client.resource(PODS).create(pod.manifest(), namespace=NAMESPACE)
            created += 1
        except errors.AlreadyExists:
            pass
    return created


# --- waiting ------------------------------------------------------------------------------------------
T = TypeVar("T")


class Watched(Generic[T]):
    """An informer whose every change wakes those waiting on a condition over its objects."""

    def __init__(self, informer: Informer[T]) -> None:
        self._informer = informer
        self._changed = threading.Condition()
        informer.add_handlers(on_add=self._notify, on_update=lambda _old, new: self._notify(new))

    def _notify(self, _obj: T) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait_until(self, missing: Callable[[list[T]], dict[str, str]], timeout: float) -> dict[str, str]:
        """Until `missing` (what is not there yet: name -> what, in words) of the objects is empty;
        what is still missing when `timeout` passes (empty: all is there). Waits at most `timeout`."""
        deadline = time.monotonic() + timeout
        self._informer.start()
        try:
            with self._changed:
                self._changed.wait_for(lambda: not missing(self._informer.store.list()), deadline - time.monotonic())
                return missing(self._informer.store.list())
        finally:
            self._informer.stop()


def wait_nodes_ready(
    client: Client, gpu_nodes: Iterable[str], other_nodes: Iterable[str], timeout: float
) -> dict[str, str]:
    """Until the nodes are registered and Ready, and each of `gpu_nodes` offers GPUs (the agent
    wrote its Device CR and the controller turned it into allocatable). Returns what is still
    missing when `timeout` passes, by node (empty: every node is ready)."""
    gpu, other = set(gpu_nodes), set(other_nodes)

    def missing(nodes: list[Node]) -> dict[str, str]:
        by_name = {n.name: n for n in nodes}
        out = {}
        for name in sorted(gpu | other):
            node = by_name.get(name)
            if node is None:
                out[name] = "not registered (its agent creates the Node)"
            elif not node.ready:
                out[name] = "not Ready (its agent keeps the Ready condition)"
            elif name in gpu and not node.allocatable.get(names.GPU_CORE):
                out[name] = (
                    f"offers no GPUs: no {names.GPU_CORE} in its allocatable "
                    "(its agent writes the Device CR, the controller turns it into allocatable)"
                )
        return out

    return Watched(Informer(client, NODES, parse=Node.from_dict)).wait_until(missing, timeout)


def wait_placed(client: Client, timeout: float, pods: Sequence[DemoPod] = DEMO_PODS) -> dict[str, str]:
    """Until every pod is bound, or (the one meant not to fit) has its `PodScheduled=False` reason.
    Returns the pods still waiting for the scheduler when `timeout` passes (empty: all placed)."""

    def missing(current: list[Pod]) -> dict[str, str]:
        by_name = {p.name: p for p in current}
        out = {}
        for demo in pods:
            pod = by_name.get(demo.name)
            if pod is None:
                out[demo.name] = "not seen yet"
            elif not (pod.node_name or (demo.unschedulable and pod.pending_message)):
                out[demo.name] = f"not bound ({pod.pending_message or 'not tried yet'})"
        return out

    return Watched(Informer(client, PODS, parse=Pod.from_dict, namespace=NAMESPACE)).wait_until(missing, timeout)


# --- the table ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Placement:
    pod: str
    asks: str
    node: str = ""
    gpus: str = ""
    rdma: str = ""
    reason: str = ""


def _gpus(allocated: Sequence[allocation.DeviceAllocation]) -> str:
    parts = []
    for gpu in allocated:
        core = gpu.resources.get(names.GPU_CORE, 0)
        ratio = gpu.resources.get(names.GPU_MEMORY_RATIO, 0)
        if core >= 100 and ratio >= 100:
            parts.append(str(gpu.minor))
            continue
        memory = resources.format_list({names.GPU_MEMORY: gpu.resources.get(names.GPU_MEMORY, 0)})[names.GPU_MEMORY]
        share = f"{core}% core, {memory}" if core else memory  # a memory-only request shares the cores
        parts.append(f"{gpu.minor} ({share})")
    return ", ".join(parts)


def _rdma(allocated: Sequence[allocation.DeviceAllocation]) -> str:
    parts = []
    for nic in allocated:
        vfs = "".join(f" VF {vf.minor}" for vf in nic.vfs)
        parts.append(f"mlx5_{nic.minor}{vfs}")
    return ", ".join(parts)


def placements(client: Client, pods: Sequence[DemoPod] = DEMO_PODS) -> list[Placement]:
    """Where each demo pod is now (read from the API server)."""
    current = {p["metadata"]["name"]: Pod.from_dict(p) for p in client.resource(PODS).list(namespace=NAMESPACE).items}
    devices: dict[str, Device | None] = {}
    rows = []
    for demo in pods:
        pod = current.get(demo.name)
        if pod is None:
            rows.append(Placement(demo.name, demo.asks, reason="not found (deleted?)"))
            continue
        if not pod.node_name:
            rows.append(Placement(demo.name, demo.asks, reason=pod.pending_message or "waiting for the scheduler"))
            continue
        try:
            allocated = allocation.from_pod_annotations(pod.annotations, obj=pod.key)
        except AnnotationError as e:
            rows.append(Placement(demo.name, demo.asks, node=pod.node_name, reason=str(e)))
            continue
        gpus = allocated.get(DeviceType.GPU, ())
        if len(gpus) > 1 and pod.node_name not in devices:
            devices[pod.node_name] = _device(client, pod.node_name)
        device = devices.get(pod.node_name)
        nvlink = " (NVLink)" if device is not None and len(gpus) > 1 and device.nvlinked(g.minor for g in gpus) else ""
        rows.append(
            Placement(
                demo.name,
                demo.asks,
                node=pod.node_name,
                gpus=_gpus(gpus) + nvlink,
                rdma=_rdma(allocated.get(DeviceType.RDMA, ())),
            )
        )
    return rows


def _device(client: Client, node: str) -> Device | None:
    """The node's Device CR, or None when it is gone or unreadable (the table then says nothing
    of NVLink)."""
    try:
        return Device.from_dict(client.resource(names.DEVICES).get(node))
    except TesseraError:  # kube.APIError (gone, unreachable) or a malformed CR
        return None


def render(rows: Sequence[Placement]) -> str:
    """A table for people: a placed pod's node, GPUs and RDMA devices; otherwise why it waits."""
    header = ("POD", "ASKS FOR", "NODE", "GPU (minor)", "RDMA")
    placed = [(r.pod, r.asks, r.node, r.gpus or "-", r.rdma or "-") for r in rows if r.node and not r.reason]
    widths = [
        max(len(cells[i]) for cells in [header, *placed, *((r.pod, r.asks, "-") for r in rows)]) for i in range(3)
    ]
    widths.append(max(len(cells[3]) for cells in [header, *placed]))

    def line(*cells: str) -> str:
        """Every cell but the last padded to its column's width."""
        *padded, last = cells
        return ("  ".join(c.ljust(w) for c, w in zip(padded, widths, strict=False)) + "  " + last).rstrip()

    lines = [line(*header)]
    for r in rows:
        if r.node and not r.reason:
            lines.append(line(r.pod, r.asks, r.node, r.gpus or "-", r.rdma or "-"))
        else:
            lines.append(line(r.pod, r.asks, r.node or "-", ("pending: " if not r.node else "") + r.reason))
    return "\n".join(lines)
