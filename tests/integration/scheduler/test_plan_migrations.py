"""PlanMigrations live: the embedded API server in one process, `tessera scheduler` in another.

Two 4-GPU nodes and a 2-GPU spare. gpu-a runs two small pods (GPUs 0 and 1), gpu-b three (GPUs
0, 1, 2), all owned by a ReplicaSet, bound before the scheduler starts. A pending 4-GPU pod fits
nowhere; the plan moves gpu-a's two pods elsewhere. The scheduler's own cache is left alone
(devices before and after the call are the same) and bad requests get precise gRPC errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest

from apis.crds.device import DeviceType
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess, pod_manifest
from kube import Client, resources
from proto.scheduler.v1 import scheduler_pb2 as pb
from proto.scheduler.v1 import scheduler_pb2_grpc
from scheduler.simulation.cluster import NodeShape

from .conftest import PodWatch, condition, create_gpu_nodes, create_namespace

pytestmark = pytest.mark.integration

TRAIN = "train"
#: pod -> (node, GPU, percent)
SMALL = {
    "a0": ("gpu-a", 0, 30),
    "a1": ("gpu-a", 1, 30),
    "b0": ("gpu-b", 0, 20),
    "b1": ("gpu-b", 1, 20),
    "b2": ("gpu-b", 2, 20),
}


class Cluster:
    def __init__(self, client: Client, scheduler: SchedulerProcess, namespace: str) -> None:
        self.client = client
        self.scheduler = scheduler
        self.namespace = namespace
        self.channel = grpc.insecure_channel(scheduler.grpc_address)
        self.stub = scheduler_pb2_grpc.SchedulerStub(self.channel)


def small_pod(namespace: str, name: str, node: str, gpu: int, percent: int) -> dict[str, object]:
    held = DeviceAllocation(minor=gpu, resources={names.GPU_CORE: percent, names.GPU_MEMORY_RATIO: percent})
    manifest = pod_manifest(
        name,
        {names.CPU: "1", names.MEMORY: "1Gi", names.GPU_CORE: percent, names.GPU_MEMORY_RATIO: percent},
        namespace=namespace,
        node_name=node,
        annotations={names.ANNOTATION_DEVICE_ALLOCATED: allocation.encode({DeviceType.GPU: (held,)})},
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": f"rs-{name}",
        "uid": f"rs-{name}",
        "controller": True,
    }
    manifest["metadata"]["ownerReferences"] = [owner]
    manifest["status"] = {"phase": "Running"}
    return manifest


@pytest.fixture(scope="module")
def cluster(
    apiserver: EmbeddedAPIServer, module_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    create_gpu_nodes(module_client, "gpu-a", "gpu-b", shape=NodeShape(gpus=4))
    create_gpu_nodes(module_client, "gpu-s", shape=NodeShape(gpus=2))
    namespace = create_namespace(module_client)
    pods = module_client.resource(resources.PODS)
    for name, (node, gpu, percent) in SMALL.items():
        pods.create(small_pod(namespace, name, node, gpu, percent), namespace=namespace)
    train = pod_manifest(TRAIN, {names.CPU: "1", names.MEMORY: "1Gi", names.NVIDIA_GPU: "4"}, namespace=namespace)
    pods.create(train, namespace=namespace)
    scheduler = SchedulerProcess(apiserver.kubeconfig, tmp_path_factory.mktemp("plan"))
    scheduler.start()
    watch = PodWatch(module_client, namespace)
    try:
        # Once the scheduler has tried the pod, its cache holds the bound pods (synced first).
        watch.wait_for(lambda _: (condition(watch.pod(TRAIN)) or ("",))[0] == "False", "train unschedulable")
        c = Cluster(module_client, scheduler, namespace)
        yield c
        c.channel.close()
    finally:
        watch.stop()
        scheduler.stop()


def test_a_plan_frees_the_node_with_the_fewest_moves_and_leaves_the_live_cache_alone(cluster: Cluster) -> None:
    before = cluster.stub.GetNodeDevices(pb.GetNodeDevicesRequest(), timeout=30)
    response = cluster.stub.PlanMigrations(
        pb.PlanMigrationsRequest(namespace=cluster.namespace, name=TRAIN), timeout=30
    )
    assert response.feasible, response.message
    assert response.node == "gpu-a"
    moves = {(m.pod, m.from_node) for m in response.migrations}
    assert moves == {(f"{cluster.namespace}/a0", "gpu-a"), (f"{cluster.namespace}/a1", "gpu-a")}
    assert all(m.to_node in {"gpu-b", "gpu-s"} and m.uid for m in response.migrations)
    assert "fits on gpu-a after 2 migrations" in response.message
    assert cluster.stub.GetNodeDevices(pb.GetNodeDevicesRequest(), timeout=30) == before


def test_exclude_and_the_budget_are_honoured(cluster: Cluster) -> None:
    excluded = cluster.stub.PlanMigrations(
        pb.PlanMigrationsRequest(namespace=cluster.namespace, name=TRAIN, exclude=[f"{cluster.namespace}/a0"]),
        timeout=30,
    )
    assert excluded.feasible and excluded.node == "gpu-b" and len(excluded.migrations) == 3
    too_few = cluster.stub.PlanMigrations(
        pb.PlanMigrationsRequest(namespace=cluster.namespace, name=TRAIN, max_migrations=1), timeout=30
    )
    assert not too_few.feasible and not too_few.migrations
    assert "no plan of at most 1 migrations" in too_few.message


def test_a_pod_that_fits_already_needs_nothing(cluster: Cluster) -> None:
    pod = pod_manifest("one", {names.NVIDIA_GPU: "1"}, namespace=cluster.namespace)
    response = cluster.stub.PlanMigrations(pb.PlanMigrationsRequest(pod_json=json.dumps(pod)), timeout=30)
    assert response.feasible and response.node and not response.migrations


@pytest.mark.parametrize(
    ("request_", "code", "words"),
    [
        (pb.PlanMigrationsRequest(namespace="nowhere", name="ghost"), grpc.StatusCode.NOT_FOUND, "does not exist"),
        (pb.PlanMigrationsRequest(pod_json="{not json"), grpc.StatusCode.INVALID_ARGUMENT, "pod_json is not JSON"),
        (pb.PlanMigrationsRequest(), grpc.StatusCode.INVALID_ARGUMENT, "name (or pod_json) is required"),
        (pb.PlanMigrationsRequest(name="x", max_migrations=-1), grpc.StatusCode.INVALID_ARGUMENT, "max_migrations"),
    ],
    ids=["unknown-pod", "bad-json", "nothing-named", "negative-budget"],
)
def test_bad_requests_get_precise_errors(
    cluster: Cluster, request_: pb.PlanMigrationsRequest, code: grpc.StatusCode, words: str
) -> None:
    with pytest.raises(grpc.RpcError) as e:
        cluster.stub.PlanMigrations(request_, timeout=30)
    assert e.value.code() is code and words in e.value.details()


def test_a_bound_pod_is_not_pending(cluster: Cluster) -> None:
    with pytest.raises(grpc.RpcError) as e:
        cluster.stub.PlanMigrations(pb.PlanMigrationsRequest(namespace=cluster.namespace, name="a0"), timeout=30)
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "is bound to gpu-a: nothing to make room for" in e.value.details()
