"""A fragmented cluster as Kubernetes manifests, for the defragmentation tests (live and offline).

Two 4-GPU nodes and a 2-GPU spare. gpu-a runs two small pods (GPUs 0 and 1, 30% each), gpu-b
three (GPUs 0, 1, 2, 20% each), all owned by a ReplicaSet; `train` asks for 4 whole GPUs and fits
nowhere until gpu-a's two pods move (the fewest moves).
"""

from __future__ import annotations

from typing import Any

from apis.crds.device import DeviceType
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation
from cli.launchers.scheduler import node_manifest, pod_manifest
from scheduler.simulation.cluster import NodeShape, gpu_node

TRAIN = "train"
#: node -> GPUs
NODES = {"gpu-a": 4, "gpu-b": 4, "gpu-s": 2}
#: pod -> (node, GPU, percent)
SMALL = {
    "a0": ("gpu-a", 0, 30),
    "a1": ("gpu-a", 1, 30),
    "b0": ("gpu-b", 0, 20),
    "b1": ("gpu-b", 1, 20),
    "b2": ("gpu-b", 2, 20),
}


def node_objects() -> list[dict[str, Any]]:
    """Each node's Node and Device manifests."""
    out = []
    for name, gpus in NODES.items():
        node, device = gpu_node(name, NodeShape(gpus=gpus))
        out += [node_manifest(node), {"apiVersion": "scheduling.koordinator.sh/v1alpha1", **device.to_dict()}]
    return out


def small_pod(namespace: str, name: str) -> dict[str, Any]:
    """A running pod of SMALL, bound with its device-allocated annotation, owned by a ReplicaSet."""
    node, gpu, percent = SMALL[name]
    held = DeviceAllocation(minor=gpu, resources={names.GPU_CORE: percent, names.GPU_MEMORY_RATIO: percent})
    manifest = pod_manifest(
        name,
        {names.CPU: "1", names.MEMORY: "1Gi", names.GPU_CORE: percent, names.GPU_MEMORY_RATIO: percent},
        namespace=namespace,
        node_name=node,
        annotations={names.ANNOTATION_DEVICE_ALLOCATED: allocation.encode({DeviceType.GPU: (held,)})},
    )
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"rs-{name}", "uid": f"rs-{name}"}
    manifest["metadata"]["ownerReferences"] = [{**owner, "controller": True}]
    manifest["status"] = {"phase": "Running"}
    return manifest


def train_pod(namespace: str) -> dict[str, Any]:
    return pod_manifest(TRAIN, {names.CPU: "1", names.MEMORY: "1Gi", names.NVIDIA_GPU: "4"}, namespace=namespace)
