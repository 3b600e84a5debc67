"""The demo's table read back from a real `tessera apiserver`: each placed pod's GPUs, marked
`(NVLink)` when the node's Device CR says NVLink joins them all."""

from __future__ import annotations

import contextlib
import uuid

import pytest

from agent.devices.cr import build_device
from agent.discovery.simulated import load_profile
from apis.crds.device import DeviceType
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation
from cli.localcluster import demo
from kube import errors
from kube.client import Client
from kube.resources import NAMESPACES, PODS

pytestmark = pytest.mark.integration


def bind(client: Client, pod: demo.DemoPod, node: str, *minors: int) -> None:
    """Create `pod` as the scheduler would leave it: bound to `node`, holding whole GPUs `minors`."""
    manifest = pod.manifest()
    gpus = tuple(DeviceAllocation(m, {names.GPU_CORE: 100, names.GPU_MEMORY_RATIO: 100}) for m in minors)
    manifest["metadata"].setdefault("annotations", {})[names.ANNOTATION_DEVICE_ALLOCATED] = allocation.encode(
        {DeviceType.GPU: gpus}
    )
    manifest["spec"]["nodeName"] = node
    client.resource(PODS).create(manifest)


def test_placed_gpus_that_nvlink_joins_are_marked(client: Client) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": demo.NAMESPACE}}
    with contextlib.suppress(errors.AlreadyExists):
        client.resource(NAMESPACES).create(namespace)
    node = f"bridged-{uuid.uuid4().hex[:6]}"  # a100-pcie-4x: NVLink bridges join 0-1 and 2-3
    device = build_device(load_profile("a100-pcie-4x").inventory(node), {}, node_name=node)
    client.resource(names.DEVICES).create(device.to_dict())
    pods = tuple(demo.DemoPod(f"{name}-{node}", "2 whole GPUs", {names.NVIDIA_GPU: "2"}) for name in ("a", "b", "c"))
    bind(client, pods[0], node, 0, 1)
    bind(client, pods[1], node, 1, 2)
    bind(client, pods[2], "no-device-cr", 0, 1)
    assert [row.gpus for row in demo.placements(client, pods)] == ["0, 1 (NVLink)", "1, 2", "0, 1"]
