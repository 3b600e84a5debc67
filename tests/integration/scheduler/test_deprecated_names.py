"""Koordinator's deprecated device names end to end, real processes over HTTP: the embedded API
server, `tessera controller` and `tessera scheduler`.

The cluster is one migrated from Koordinator before v1.2: its Node carries the GPU resources as
that release's manager published them (`kubernetes.io/gpu-core`, ...) and its Device CR is the
old koordlet's, in the same names. The controller publishes the GPU under the current names
beside the old ones (which, as in Koordinator, are not its own); a pod asking in the old names
(the way Koordinator's docs and examples still do) binds and shares the GPU with a
`koordinator.sh/` pod, the Node's two spellings counting as one GPU; a third half of a GPU, in
either spelling, stays pending with a reason about GPUs (not "Insufficient
kubernetes.io/gpu-core"), and a pod giving one resource in both spellings is told exactly that.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apis.crds.device import DeviceType
from apis.extension import allocation, names
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.controller import ControllerProcess
from cli.launchers.scheduler import SchedulerProcess
from kube import Client, crds, resources
from tests.support.cluster import PodWatch, condition, create_namespace, create_pod, unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

OLD_HALF = {names.DEPRECATED_GPU_CORE: "50", names.DEPRECATED_GPU_MEMORY_RATIO: "50"}
NEW_HALF = {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}
#: What Koordinator before v1.2 published for one 80Gi GPU, as its manager wrote it on the Node.
OLD_NODE_GPU = {names.DEPRECATED_GPU_CORE: "100", names.DEPRECATED_GPU_MEMORY: "80Gi"}
KUBELET = {"cpu": "64", "memory": "256Gi", "pods": "110"}
#: What the controller publishes for that GPU.
CURRENT_NODE_GPU = {
    names.GPU_CORE: "100",
    names.GPU_MEMORY: "80Gi",
    names.GPU_MEMORY_RATIO: "100",
    names.KOORD_GPU: "100",
}


def create_old_koordinator_node(client: Client, node: str) -> None:
    status = {**KUBELET, **OLD_NODE_GPU}
    client.resource(resources.NODES).create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node},
            "status": {"capacity": status, "allocatable": status, "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    old_gpu = {names.DEPRECATED_GPU_CORE: "100", names.DEPRECATED_GPU_MEMORY: "80Gi"}
    old_gpu[names.DEPRECATED_GPU_MEMORY_RATIO] = "100"
    crds.devices(client).api.create(
        {
            "apiVersion": names.DEVICES.api_version,
            "kind": names.DEVICES.kind,
            "metadata": {"name": node, "labels": {names.LABEL_GPU_VENDOR: "nvidia"}},
            "spec": {
                "devices": [
                    {
                        "type": "gpu",
                        "id": f"GPU-{node}-0",
                        "minor": 0,
                        "health": True,
                        "resources": old_gpu,
                        "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:10", "busID": "0000:1f:00.0"},
                    }
                ]
            },
        }
    )


def node_status(client: Client, node: str) -> dict[str, Any]:
    return dict(client.resource(resources.NODES).get(node)["status"]["allocatable"])


class Cluster:
    def __init__(self, client: Client, node: str, namespace: str) -> None:
        self.client = client
        self.node = node
        self.namespace = namespace
        self.watch = PodWatch(client, namespace)


@pytest.fixture(scope="module")
def cluster(
    apiserver: EmbeddedAPIServer, module_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    node = unique("old-koord")
    create_old_koordinator_node(module_client, node)
    work: Path = tmp_path_factory.mktemp("dep")
    controller = ControllerProcess(apiserver.kubeconfig, directory=work / "controller")
    scheduler = SchedulerProcess(apiserver.kubeconfig, work)
    try:
        controller.start()
        scheduler.start()
        c = Cluster(module_client, node, create_namespace(module_client))
        yield c
        c.watch.stop()
    finally:
        scheduler.stop()
        controller.terminate()


def test_the_controller_publishes_the_old_devices_under_the_current_names(cluster: Cluster) -> None:
    want = {**KUBELET, **OLD_NODE_GPU, **CURRENT_NODE_GPU}
    wait_for(
        lambda: node_status(cluster.client, cluster.node) == want,
        timeout_s=90,
        what=f"allocatable of {cluster.node} to be {want}",
    )


def test_a_deprecated_name_pod_binds_and_shares_the_gpu_with_a_current_one(cluster: Cluster) -> None:
    create_pod(cluster.client, cluster.namespace, "old-half", OLD_HALF)
    create_pod(cluster.client, cluster.namespace, "new-half", NEW_HALF)
    cluster.watch.wait_bound(2)
    shares = {}
    for pod in cluster.watch.pods():
        (gpu,) = allocation.from_pod_annotations(pod.annotations)[DeviceType.GPU]
        shares[pod.name] = (pod.node_name, gpu.minor, gpu.resources[names.GPU_CORE], gpu.resources[names.GPU_MEMORY])
    assert shares == {"old-half": (cluster.node, 0, 50, 40 << 30), "new-half": (cluster.node, 0, 50, 40 << 30)}
    annotation = cluster.watch.pod("old-half").annotations[names.ANNOTATION_DEVICE_ALLOCATED]
    assert names.DEPRECATED_RESOURCE_DOMAIN not in annotation  # written in the current names only

    # The GPU is full: a third half in the old names waits for GPUs, not for a resource no node has.
    create_pod(cluster.client, cluster.namespace, "old-third", OLD_HALF)
    pods = cluster.watch.wait_for(
        lambda pods: any(p.name == "old-third" and (condition(p) or ("",))[0] == "False" for p in pods),
        "old-third to be reported unschedulable",
    )
    status, reason, message = condition(next(p for p in pods if p.name == "old-third")) or ("", "", "")
    assert (status, reason) == ("False", "Unschedulable")
    assert "Insufficient gpu devices" in message and names.DEPRECATED_RESOURCE_DOMAIN not in message


def test_one_resource_in_both_spellings_is_refused_with_both_names(cluster: Cluster) -> None:
    create_pod(cluster.client, cluster.namespace, "mixed", {**NEW_HALF, names.DEPRECATED_GPU_CORE: "50"})
    pods = cluster.watch.wait_for(
        lambda pods: any(p.name == "mixed" and (condition(p) or ("",))[0] == "False" for p in pods),
        "mixed to be reported unschedulable",
    )
    _, _, message = condition(next(p for p in pods if p.name == "mixed")) or ("", "", "")
    assert "kubernetes.io/gpu-core and koordinator.sh/gpu-core are the same resource" in message
