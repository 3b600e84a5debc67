"""PlanMigrations live: the embedded API server in one process, `tessera scheduler` in another.

Two 4-GPU nodes and a 2-GPU spare. gpu-a runs two small pods (GPUs 0 and 1), gpu-b three (GPUs
0, 1, 2), all owned by a ReplicaSet, bound before the scheduler starts. A pending 4-GPU pod fits
nowhere; the plan moves gpu-a's two pods elsewhere. The scheduler's own cache is left alone
(devices before and after the call are the same) and bad requests get precise gRPC errors.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from apis.crds.podmigrationjob import PodMigrationJob
from apis.extension import names
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess, pod_manifest
from kube import Client, resources
from proto.scheduler.v1 import scheduler_pb2 as pb
from proto.scheduler.v1 import scheduler_pb2_grpc
from scheduler.simulation.cluster import NodeShape
from tests.support.cluster import PodWatch, condition, create_gpu_nodes, create_namespace
from tests.support.defragcluster import NODES, SMALL, TRAIN, small_pod, train_pod

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


class Cluster:
    def __init__(self, client: Client, scheduler: SchedulerProcess, namespace: str, kubeconfig: Path) -> None:
        self.client = client
        self.kubeconfig = kubeconfig
        self.scheduler = scheduler
        self.namespace = namespace
        self.channel = grpc.insecure_channel(scheduler.grpc_address)
        self.stub = scheduler_pb2_grpc.SchedulerStub(self.channel)


@pytest.fixture(scope="module")
def cluster(
    apiserver: EmbeddedAPIServer, module_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    for gpus in sorted(set(NODES.values())):
        create_gpu_nodes(module_client, *(n for n, g in NODES.items() if g == gpus), shape=NodeShape(gpus=gpus))
    namespace = create_namespace(module_client)
    pods = module_client.resource(resources.PODS)
    for name in SMALL:
        pods.create(small_pod(namespace, name), namespace=namespace)
    pods.create(train_pod(namespace), namespace=namespace)
    scheduler = SchedulerProcess(apiserver.kubeconfig, tmp_path_factory.mktemp("plan"))
    scheduler.start()
    watch = PodWatch(module_client, namespace)
    try:
        # Once the scheduler has tried the pod, its cache holds the bound pods (synced first).
        watch.wait_for(lambda _: (condition(watch.pod(TRAIN)) or ("",))[0] == "False", "train unschedulable")
        c = Cluster(module_client, scheduler, namespace, apiserver.kubeconfig)
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


# --- tessera deschedule against the live scheduler ----------------------------------------------------
def deschedule(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "deschedule", *args, "--scheduler", cluster.scheduler.grpc_address],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_tessera_deschedule_dry_run_prints_the_plan(cluster: Cluster) -> None:
    result = deschedule(cluster, "--dry-run", TRAIN, "-n", cluster.namespace)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{cluster.namespace}/{TRAIN}: pod {cluster.namespace}/{TRAIN} fits on gpu-a after 2")
    assert lines[1].split() == ["#", "MOVE", "FROM", "TO", "GPU"]
    assert [[*line.split()[1:3], line.split()[4]] for line in lines[2:4]] == [
        [f"{cluster.namespace}/a0", "gpu-a", "30%"],
        [f"{cluster.namespace}/a1", "gpu-a", "30%"],
    ]
    assert lines[4] == "  frees gpu-a: 4 GPUs free there after the moves"
    assert result.stderr == ""


def test_tessera_deschedule_without_a_pod_plans_for_every_pending_one_and_says_it_moves_nothing(
    cluster: Cluster,
) -> None:
    result = deschedule(cluster, "-n", cluster.namespace, "-o", "json")
    assert result.returncode == 0, result.stderr
    plans = json.loads(result.stdout)["plans"]
    assert [(p["pod"], p["feasible"], p["node"], len(p["migrations"])) for p in plans] == [
        (f"{cluster.namespace}/{TRAIN}", True, "gpu-a", 2)
    ]
    assert "only plans; nothing was moved" in result.stderr
    missing = deschedule(cluster, "ghost", "-n", cluster.namespace)
    assert missing.returncode == 1 and f"pod {cluster.namespace}/ghost does not exist" in missing.stderr


def test_tessera_deschedule_apply_hands_the_moves_to_the_descheduler_once(cluster: Cluster) -> None:
    kubeconfig = str(cluster.kubeconfig)
    first = deschedule(cluster, "--apply", TRAIN, "-n", cluster.namespace, "--kubeconfig", kubeconfig)
    assert first.returncode == 0, first.stderr
    jobs = [PodMigrationJob.from_dict(o) for o in cluster.client.resource(names.POD_MIGRATION_JOBS).list().items]
    moved = sorted((j.pod_ref.namespace, j.pod_ref.name, j.mode.value) for j in jobs)
    assert moved == [(cluster.namespace, "a0", "ReservationFirst"), (cluster.namespace, "a1", "ReservationFirst")]
    assert all(j.pod_ref.uid for j in jobs)
    # Pinned where the plan put them (never back onto gpu-a), for train (its uid: no second plan).
    train_uid = cluster.client.resource(resources.PODS).get(TRAIN, namespace=cluster.namespace)["metadata"]["uid"]
    assert all(j.meta.labels == {names.LABEL_MIGRATION_FOR: train_uid} for j in jobs)
    assert {j.meta.annotations[names.ANNOTATION_MIGRATION_TARGET_NODE] for j in jobs} <= {"gpu-b", "gpu-s"}
    assert first.stderr.count(" created (moves ") == 2
    again = deschedule(cluster, "--apply", TRAIN, "-n", cluster.namespace, "--kubeconfig", kubeconfig)
    assert again.returncode == 0 and again.stderr.count(" already exists (moves ") == 2
    assert len(cluster.client.resource(names.POD_MIGRATION_JOBS).list().items) == 2


def test_plans_are_counted_by_result(cluster: Cluster) -> None:
    s = cluster.scheduler
    before = {r: s.metric("tessera_scheduler_migration_plans_total", {"result": r}) for r in ("fits", "planned")}
    cluster.stub.PlanMigrations(pb.PlanMigrationsRequest(namespace=cluster.namespace, name=TRAIN), timeout=30)
    one = pod_manifest("one", {names.NVIDIA_GPU: "1"}, namespace=cluster.namespace)
    cluster.stub.PlanMigrations(pb.PlanMigrationsRequest(pod_json=json.dumps(one)), timeout=30)
    assert s.metric("tessera_scheduler_migration_plans_total", {"result": "planned"}) == before["planned"] + 1
    assert s.metric("tessera_scheduler_migration_plans_total", {"result": "fits"}) == before["fits"] + 1
    assert s.metric("tessera_scheduler_migration_plan_duration_seconds_count") >= 2
