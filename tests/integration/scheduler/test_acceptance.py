"""Acceptance: the embedded API server in one process, `tessera scheduler` in another.

Two nodes with 8 GPUs each and 20 pods of mixed GPU shapes: every pod is bound, every
annotation names devices of its node's Device CR and no GPU is over-committed. A pod that cannot
fit gets PodScheduled=False with kube's summary and a FailedScheduling Event, and `tessera
explain` says why. The gRPC methods and the diagnostics paths are checked against the same
running scheduler.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from apis.crds.device import DeviceType
from apis.extension import allocation, names
from apis.k8s.core import Pod
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess, pod_manifest
from kube import Client
from proto.scheduler.v1 import scheduler_pb2 as pb
from proto.scheduler.v1 import scheduler_pb2_grpc
from tests.support.cluster import (
    GPU_HALF,
    GPU_QUARTER,
    PodWatch,
    assert_no_device_shared_beyond_capacity,
    condition,
    create_gpu_nodes,
    create_namespace,
    create_pod,
    wait_for_event,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
NODES = ("gpu-a", "gpu-b")
#: name prefix -> (count, requests): 12.5 GPUs of 16 in all.
MIX: dict[str, tuple[int, dict[str, str]]] = {
    "half": (6, GPU_HALF),
    "quarter": (4, GPU_QUARTER),
    "one": (4, {names.NVIDIA_GPU: "1"}),
    "two": (2, {names.NVIDIA_GPU: "2"}),
    "mem": (2, {names.GPU_MEMORY: "20Gi"}),
    "cpu": (2, {}),
}
TOO_BIG = "too-big"


class Cluster:
    def __init__(self, server: EmbeddedAPIServer, client: Client, scheduler: SchedulerProcess, namespace: str) -> None:
        self.server = server
        self.client = client
        self.scheduler = scheduler
        self.namespace = namespace
        self.watch = PodWatch(client, namespace)
        self.channel = grpc.insecure_channel(scheduler.grpc_address)
        self.stub = scheduler_pb2_grpc.SchedulerStub(self.channel)


@pytest.fixture(scope="module")
def cluster(
    apiserver: EmbeddedAPIServer, module_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    create_gpu_nodes(module_client, *NODES)
    namespace = create_namespace(module_client)
    scheduler = SchedulerProcess(apiserver.kubeconfig, tmp_path_factory.mktemp("acc"))
    scheduler.start()
    try:
        c = Cluster(apiserver, module_client, scheduler, namespace)
        for prefix, (count, requests) in MIX.items():
            for i in range(count):
                create_pod(module_client, namespace, f"{prefix}-{i}", requests)
        # Fits on an empty node, but not once the 20 pods are placed.
        create_pod(module_client, namespace, TOO_BIG, {names.NVIDIA_GPU: "8"})
        c.watch.wait_bound(20)
        yield c
        c.channel.close()
        c.watch.stop()
    finally:
        scheduler.stop()


def bound(cluster: Cluster) -> list[Pod]:
    return [p for p in cluster.watch.pods() if p.node_name]


def test_every_pod_is_bound_with_devices_matching_the_device_crs(cluster: Cluster) -> None:
    pods = bound(cluster)
    assert len(pods) == 20 and TOO_BIG not in {p.name for p in pods}
    assert {p.node_name for p in pods} == set(NODES)
    assert_no_device_shared_beyond_capacity(cluster.client, pods)
    for pod in pods:
        gpus = allocation.from_pod_annotations(pod.annotations).get(DeviceType.GPU, ())
        prefix = pod.name.rsplit("-", 1)[0]
        cores = sorted(a.resources.get(names.GPU_CORE, 0) for a in gpus)
        expected = {"half": [50], "quarter": [25], "one": [100], "two": [100, 100], "cpu": []}
        if prefix in expected:
            assert cores == expected[prefix], pod.name
        elif prefix == "mem":
            (gpu,) = gpus
            assert gpu.resources[names.GPU_MEMORY] == 20 << 30 and gpu.resources[names.GPU_MEMORY_RATIO] == 25
        assert all(a.id == f"GPU-{pod.node_name}-{a.minor:02d}" for a in gpus), pod.name
        assert condition(pod) == ("True", "", "")


def test_a_pod_that_cannot_fit_gets_the_condition_and_an_event(cluster: Cluster) -> None:
    pods = cluster.watch.wait_for(
        lambda pods: (c := condition(next(p for p in pods if p.name == TOO_BIG))) is not None and c[0] == "False",
        "the PodScheduled=False condition",
    )
    big = next(p for p in pods if p.name == TOO_BIG)
    status, reason, message = condition(big) or ("", "", "")
    assert (status, reason) == ("False", "Unschedulable")
    assert message == "0/2 nodes are available: 2 Insufficient gpu devices."
    events = wait_for_event(cluster.client, cluster.namespace, TOO_BIG, "FailedScheduling")
    assert [(e["type"], e["message"]) for e in events] == [("Warning", message)]


def test_tessera_explain_prints_why(cluster: Cluster) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cli", "explain", TOO_BIG, "-n", cluster.namespace],
        cwd=ROOT,
        env={"TESSERA_SCHEDULER_ADDRESS": cluster.scheduler.grpc_address, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"Pod {cluster.namespace}/{TOO_BIG}: pending" in out
    assert "unschedulable, waiting for a cluster change" in out
    assert "Last attempt: 0/2 nodes are available: 2 Insufficient gpu devices." in out
    assert "DeviceShare  2 nodes: Insufficient gpu devices" in out
    assert "gpu-a  DeviceShare: Insufficient gpu devices" in out
    assert "Nearest nodes, and what they lack:" in out and "gpu devices free, needs 8" in out
    bound_out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "explain",
            f"{cluster.namespace}/two-0",
            "--scheduler",
            cluster.scheduler.grpc_address,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert f"Pod {cluster.namespace}/two-0: bound to gpu-" in bound_out
    assert bound_out.count("gpu-core=100") == 2


# --- gRPC -------------------------------------------------------------------------------------------
def test_grpc_schedule_is_a_dry_run(cluster: Cluster) -> None:
    before = cluster.stub.GetNodeDevices(pb.GetNodeDevicesRequest(), timeout=30)
    pod = pod_manifest("what-if", GPU_QUARTER, namespace=cluster.namespace)
    answer = cluster.stub.Schedule(pb.ScheduleRequest(pod_json=json.dumps(pod)), timeout=30)
    assert answer.schedulable and answer.node in NODES and answer.profile == names.SCHEDULER_NAME
    (gpu,) = allocation.decode(answer.annotations[names.ANNOTATION_DEVICE_ALLOCATED])[DeviceType.GPU]
    assert gpu.resources[names.GPU_CORE] == 25
    assert cluster.stub.GetNodeDevices(pb.GetNodeDevicesRequest(), timeout=30) == before
    huge = pod_manifest("huge", {names.NVIDIA_GPU: "9"}, namespace=cluster.namespace)
    no = cluster.stub.Schedule(pb.ScheduleRequest(pod_json=json.dumps(huge)), timeout=30)
    assert not no.schedulable and no.message.startswith("0/2 nodes are available:")
    assert {r.node for r in no.reasons} == set(NODES)
    for bad, why in (("{not json", "not JSON"), ('{"spec": 3}', "not a valid pod")):
        with pytest.raises(grpc.RpcError) as e:
            cluster.stub.Schedule(pb.ScheduleRequest(pod_json=bad), timeout=30)
        assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT and why in e.value.details()


def test_grpc_explain(cluster: Cluster) -> None:
    answer = cluster.stub.Explain(pb.ExplainRequest(namespace=cluster.namespace, name=TOO_BIG), timeout=30)
    assert answer.state == "pending" and answer.pending and answer.queue == "unschedulable"
    assert answer.attempts >= 1 and answer.last_attempt.startswith("0/2 nodes are available")
    assert answer.message == "0/2 nodes are available: 2 Insufficient gpu devices."
    assert {n.node for n in answer.nodes} == set(NODES)
    assert all(r.plugin == "DeviceShare" for n in answer.nodes for r in n.reasons)
    assert answer.nearest and all(m.missing for m in answer.nearest)
    assert list(answer.waiting_for) == ["DeviceShare"]
    one = cluster.stub.Explain(pb.ExplainRequest(namespace=cluster.namespace, name="one-0"), timeout=30)
    assert one.state == "bound" and one.node in NODES and [d.resources[names.GPU_CORE] for d in one.devices] == ["100"]
    missing = cluster.stub.Explain(pb.ExplainRequest(namespace=cluster.namespace, name="nope"), timeout=30)
    assert missing.state == "not-found"
    with pytest.raises(grpc.RpcError) as e:
        cluster.stub.Explain(pb.ExplainRequest(namespace=cluster.namespace), timeout=30)
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_grpc_get_node_devices_matches_the_annotations(cluster: Cluster) -> None:
    answer = cluster.stub.GetNodeDevices(pb.GetNodeDevicesRequest(), timeout=30)
    assert [n.node for n in answer.nodes] == list(NODES)
    held: dict[tuple[str, int], set[str]] = {}
    for node in answer.nodes:
        gpus = [d for d in node.devices if d.type == "gpu"]
        assert len(gpus) == 8 and all(d.healthy and d.total[names.GPU_CORE] == "100" for d in gpus)
        assert {d.pcie for d in gpus} == {"pci0000:10", "pci0000:30", "pci0000:50", "pci0000:70"}
        for d in gpus:
            held[(node.node, d.minor)] = {h.pod.split("/")[1] for h in d.holders}
    for pod in bound(cluster):
        for a in allocation.from_pod_annotations(pod.annotations).get(DeviceType.GPU, ()):
            assert pod.name in held[(pod.node_name, a.minor)]
    one = cluster.stub.GetNodeDevices(pb.GetNodeDevicesRequest(node="gpu-a"), timeout=30)
    assert [n.node for n in one.nodes] == ["gpu-a"]
    with pytest.raises(grpc.RpcError) as e:
        cluster.stub.GetNodeDevices(pb.GetNodeDevicesRequest(node="nope"), timeout=30)
    assert e.value.code() is grpc.StatusCode.NOT_FOUND


def test_grpc_list_pending(cluster: Cluster) -> None:
    answer = cluster.stub.ListPending(pb.ListPendingRequest(namespace=cluster.namespace), timeout=30)
    assert answer.leader
    assert [(p.pod, p.queue) for p in answer.pods] == [(f"{cluster.namespace}/{TOO_BIG}", "unschedulable")]
    (big,) = answer.pods
    assert big.plugins == ["DeviceShare"] and big.message.startswith("0/2") and big.waiting_seconds > 0
    assert not cluster.stub.ListPending(pb.ListPendingRequest(namespace="elsewhere"), timeout=30).pods


def test_grpc_health_and_reflection(cluster: Cluster) -> None:
    health = health_pb2_grpc.HealthStub(cluster.channel)
    for service in ("", "tessera.scheduler.v1.Scheduler"):
        reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=30)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    reflection = reflection_pb2_grpc.ServerReflectionStub(cluster.channel)
    (reply,) = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    services = {s.name for s in reply.list_services_response.service}
    assert {"tessera.scheduler.v1.Scheduler", "grpc.health.v1.Health"} <= services


# --- diagnostics HTTP --------------------------------------------------------------------------------
def test_http_services(cluster: Cluster) -> None:
    doc = cluster.scheduler.get_json("/apis/v1/__services__")
    assert {
        "/apis/v1/__services__",
        "/apis/v1/nodes/:nodeName",
        "/apis/v1/plugins/DeviceShare/nodeDeviceSummaries",
        "/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/:name",
        "/metrics",
    } <= set(doc["GET"])
    assert "/debug/flags/s" in doc["PUT"]


def test_http_node(cluster: Cluster) -> None:
    doc = cluster.scheduler.get_json("/apis/v1/nodes/gpu-a")
    on_a = {p.name for p in bound(cluster) if p.node_name == "gpu-a"}
    assert {p["pod"].split("/")[1] for p in doc["pods"]} == on_a
    assert doc["allocatable"][names.GPU_CORE] == "800" and len(doc["devices"]) == 12
    status, body = cluster.scheduler.get("/apis/v1/nodes/nope")
    assert status == 404 and json.loads(body) == {"message": "cannot find node nope"}


def test_http_device_summaries(cluster: Cluster) -> None:
    summaries = cluster.scheduler.get_json("/apis/v1/plugins/DeviceShare/nodeDeviceSummaries")
    assert set(summaries) == set(NODES)
    one = cluster.scheduler.get_json("/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/gpu-b")
    assert one == summaries["gpu-b"]
    used = sum(int(summaries[n]["deviceUsed"].get(names.GPU_CORE, "0")) for n in NODES)
    assert used == 6 * 50 + 4 * 25 + 4 * 100 + 2 * 200  # gpu-memory-only pods take memory, not core
    pods_in_set = {pod for n in NODES for pod in summaries[n]["allocateSet"].get("gpu", {})}
    assert pods_in_set == {f"{p.namespace}/{p.name}" for p in bound(cluster) if not p.name.startswith("cpu")}
    status, body = cluster.scheduler.get("/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/nope")
    assert status == 404 and "cannot find node nope" in body.decode()


def test_http_debug_scores_switch(cluster: Cluster) -> None:
    status, body = cluster.scheduler.request("PUT", "/debug/flags/s", b"3")
    assert (status, body.decode().strip()) == (200, "successfully set debugTopNScores to 3")
    # No GPU: it fits both nodes whatever the mix left free (a pod with one feasible node is
    # not scored, and its table has no plugin columns).
    create_pod(cluster.client, cluster.namespace, "scored", {})
    cluster.watch.wait_for(lambda pods: any(p.name == "scored" and p.node_name for p in pods), "pod scored bound")
    status, body = cluster.scheduler.get("/debug/scores")
    lines = body.decode().splitlines()
    assert status == 200
    row = next(i for i, line in enumerate(lines) if f"| {cluster.namespace}/scored |" in line)
    header = next(line for line in reversed(lines[:row]) if line.startswith("| # |"))
    assert header.startswith("| # | Pod | Node | Score | GPUFragmentation |")  # the default ranks by it
    assert cluster.scheduler.request("PUT", "/debug/flags/s", b"0")[0] == 200
    assert cluster.scheduler.request("PUT", "/debug/flags/s", b"many")[0] == 400
    assert cluster.scheduler.request("PUT", "/debug/flags/v", b"4")[1].decode().strip() == (
        "successfully set klog.logging.verbosity to 4"
    )
    assert cluster.scheduler.request("PUT", "/debug/flags/v", b"2")[0] == 200
    assert cluster.scheduler.request("DELETE", "/debug/flags/s")[0] == 405


def test_http_metrics(cluster: Cluster) -> None:
    s = cluster.scheduler
    assert s.metric("tessera_scheduler_schedule_attempts_total", {"result": "scheduled"}) >= 20
    assert s.metric("tessera_scheduler_schedule_attempts_total", {"result": "unschedulable"}) >= 1
    assert s.metric("tessera_scheduler_bindings_total", {"result": "bound"}) >= 20
    assert s.metric("tessera_scheduler_pod_scheduling_duration_seconds_count") >= 20
    assert s.metric("tessera_scheduler_scheduling_attempt_duration_seconds_count") >= 21
    for point in ("PreFilter", "Filter", "Score", "Reserve", "Permit", "PreBind", "Bind"):
        assert (
            s.metric("tessera_scheduler_framework_extension_point_duration_seconds_count", {"extension_point": point})
            >= 1
        ), point
    assert s.metric("tessera_scheduler_pending_pods", {"queue": "unschedulable"}) == 1
    assert s.metric("tessera_scheduler_leader") == 1
    assert s.metric("tessera_scheduler_cache_nodes") == 2
    assert s.metric("tessera_scheduler_bind_failures_total") == 0


def test_http_health(cluster: Cluster) -> None:
    assert cluster.scheduler.get("/healthz") == (200, b"ok\n")
    assert cluster.scheduler.get("/readyz") == (200, b"ok\n")
    assert cluster.scheduler.get("/nope")[0] == 404
