"""GPU defragmentation live: the descheduler asks a planner over real gRPC on a unix socket and
turns its plan into PodMigrationJobs.

The first tests' planner is a stand-in at the gRPC boundary (a real `grpc` server serving canned
`PlanMigrations` answers): it counts the calls, to show that no new plan is asked for a pending
pod while its jobs run, and answers plans no small cluster would make. The last reaches the real
scheduler's planner; test_endtoend.py runs a whole defragmentation with every part real.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from apis.extension import names
from apis.k8s.meta import now_rfc3339
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.descheduler import DeschedulerProcess
from cli.launchers.scheduler import SchedulerProcess
from kube.client import Client
from kube.resources import EVENTS, PODS
from kube.unixsocket import UnixServer
from proto.scheduler.v1 import scheduler_pb2 as pb
from tests.integration.descheduler.migrations import TIMEOUT, create_running_pod, owner_replicaset, reservation
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


class CannedPlanner:
    """`Scheduler.PlanMigrations` answering `plan` for every pending pod, counting calls."""

    def __init__(self, plan: pb.PlanMigrationsResponse) -> None:
        self.plan = plan
        self.requests: list[pb.PlanMigrationsRequest] = []
        self._lock = threading.Lock()

    def handler(self) -> grpc.GenericRpcHandler:
        method = grpc.unary_unary_rpc_method_handler(
            self._plan,
            request_deserializer=pb.PlanMigrationsRequest.FromString,
            response_serializer=pb.PlanMigrationsResponse.SerializeToString,
        )
        return grpc.method_handlers_generic_handler("tessera.scheduler.v1.Scheduler", {"PlanMigrations": method})

    def _plan(self, request: pb.PlanMigrationsRequest, _context: object) -> pb.PlanMigrationsResponse:
        with self._lock:
            self.requests.append(request)
        return self.plan


def wait_defrag_runs(process: DeschedulerProcess, count: int) -> None:
    """Until the defrag strategy has run `count` more times: each had its chance to ask again."""

    def runs() -> float:
        return process.metric("tessera_descheduler_strategy_runs_total", strategy="defrag")

    target = runs() + count
    wait_for(lambda: runs() >= target, timeout_s=TIMEOUT, what=f"{count} runs of the defrag strategy")


@pytest.fixture
def socket_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sock", numbered=True) / "scheduler.sock"


@pytest.fixture
def planner_server(socket_path: Path) -> Iterator[Callable[[CannedPlanner], None]]:
    servers: list[UnixServer] = []

    def serve(planner: CannedPlanner) -> None:
        server = UnixServer(socket_path, [planner.handler()], mode=0o600, max_workers=2)
        server.start()
        servers.append(server)

    yield serve
    for server in servers:
        server.stop()


def create_pending_pod(client: Client, namespace: str, name: str, gpus: int) -> dict[str, Any]:
    """A pod the scheduler found unschedulable: it asks for `gpus` whole GPUs."""
    whole = {names.NVIDIA_GPU: str(gpus)}
    client.resource(PODS).create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "schedulerName": names.SCHEDULER_NAME,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": whole, "limits": whole}}],
            },
        },
        namespace=namespace,
    )
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu",
        "lastTransitionTime": now_rfc3339(),
    }
    return client.resource(PODS).patch(
        name, {"status": {"phase": "Pending", "conditions": [condition]}}, namespace=namespace, subresource="status"
    )


def test_a_plan_becomes_migrations_and_no_second_plan_is_asked_while_they_run(
    client: Client,
    namespace: str,
    socket_path: Path,
    planner_server: Callable[[CannedPlanner], None],
    start_descheduler: Callable[..., DeschedulerProcess],
) -> None:
    small = [
        create_running_pod(
            client, namespace, f"small-{i}", node="n1", owner=owner_replicaset(client, namespace, f"s{i}")
        )
        for i in range(2)
    ]
    pending = create_pending_pod(client, namespace, "train", 8)
    planner = CannedPlanner(
        pb.PlanMigrationsResponse(
            feasible=True,
            node="n1",
            migrations=[
                pb.Migration(
                    pod=f"{namespace}/small-{i}", uid=p["metadata"]["uid"], from_node="n1", to_node=f"n{i + 2}"
                )
                for i, p in enumerate(small)
            ],
            message="moving 2 pods frees 8 GPUs on n1",
        )
    )
    planner_server(planner)
    process = start_descheduler(
        "--scheduler-address", str(socket_path), "--defrag-interval", "0.3", "--defrag-min-pending", "0"
    )

    def defrag_jobs() -> list[dict[str, Any]]:
        items = client.resource(names.POD_MIGRATION_JOBS).list().items
        return [
            j
            for j in items
            if j["metadata"].get("labels", {}).get(names.LABEL_MIGRATION_FOR) == pending["metadata"]["uid"]
        ]

    jobs = wait_for(lambda: len(j := defrag_jobs()) == 2 and j, timeout_s=TIMEOUT, what="two PodMigrationJobs")
    assert sorted(j["spec"]["podRef"]["name"] for j in jobs) == ["small-0", "small-1"]
    for j in jobs:
        reason = j["metadata"]["annotations"][names.ANNOTATION_MIGRATION_REASON]
        assert f"pending pod {namespace}/train (8 whole GPUs) on n1" in reason
    request = planner.requests[0]
    assert (request.namespace, request.name) == (namespace, "train")

    # The replacement of small-0 is reserved where the planner put it.
    rsv = wait_for(
        lambda: reservation(
            client, next(f"pmj-{j['metadata']['name']}" for j in jobs if j["spec"]["podRef"]["name"] == "small-0")
        ),
        timeout_s=TIMEOUT,
        what="the reservation",
    )
    terms = rsv["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
    ]

    calls = len(planner.requests)
    wait_defrag_runs(process, 5)  # the jobs run, so no new plan for `train`
    assert len(planner.requests) == calls == 1
    assert process.metric("tessera_descheduler_jobs_created_total", strategy="defrag") == 2

    def event(reason: str) -> list[dict[str, Any]]:
        items = client.resource(EVENTS).list(namespace=namespace).items
        return [e for e in items if e["reason"] == reason]

    defrag = wait_for(lambda: event("Defragmenting"), timeout_s=TIMEOUT, what="the Defragmenting event")
    assert defrag[0]["involvedObject"]["name"] == "train"
    assert f"{namespace}/small-0 (n1 → n2)" in defrag[0]["message"]
    planned = wait_for(lambda: len(e := event("MigrationPlanned")) == 2 and e, timeout_s=TIMEOUT, what="the events")
    assert {e["involvedObject"]["name"] for e in planned} == {"small-0", "small-1"}


def test_an_infeasible_plan_creates_nothing_and_says_why(
    client: Client,
    namespace: str,
    socket_path: Path,
    planner_server: Callable[[CannedPlanner], None],
    start_descheduler: Callable[..., DeschedulerProcess],
) -> None:
    create_pending_pod(client, namespace, "huge", 16)
    planner = CannedPlanner(pb.PlanMigrationsResponse(feasible=False, message="no node has 16 GPUs"))
    planner_server(planner)
    start_descheduler("--scheduler-address", str(socket_path), "--defrag-interval", "0.3", "--defrag-min-pending", "0")
    wait_for(lambda: len(planner.requests) >= 2, timeout_s=TIMEOUT, what="the planner to be asked again")
    items = client.resource(EVENTS).list(namespace=namespace).items
    said = [e for e in items if e["reason"] == "DefragmentationNotPossible"]
    assert said and said[0]["message"] == "no node has 16 GPUs"
    jobs = client.resource(names.POD_MIGRATION_JOBS).list().items
    assert not [j for j in jobs if j["spec"]["podRef"].get("namespace") == namespace]


def test_the_real_schedulers_plan_migrations_is_reached_over_grpc(
    client: Client,
    namespace: str,
    apiserver: EmbeddedAPIServer,
    start_descheduler: Callable[..., DeschedulerProcess],
) -> None:
    """The wire against the real `tessera scheduler`: it marks the pod unschedulable (no node has
    GPUs), the descheduler's PlanMigrations call reaches it, and the planner's answer (no node to
    free) is an Event on the pod, once, and no warning in the log."""
    # A short directory: a unix socket path has 108 bytes.
    with (
        tempfile.TemporaryDirectory(prefix="s") as work,
        SchedulerProcess(apiserver.kubeconfig, Path(work)) as scheduler,
    ):
        client.resource(PODS).create(_whole_gpu_pod("train", 8), namespace=namespace)
        wait_for(lambda: _unschedulable(client, namespace, "train"), timeout_s=TIMEOUT, what="the scheduler's verdict")
        process = start_descheduler(
            "--scheduler-address", scheduler.grpc_address, "--defrag-interval", "0.3", "--defrag-min-pending", "0"
        )

        def answered() -> list[dict[str, Any]]:
            items = client.resource(EVENTS).list(namespace=namespace).items
            return [e for e in items if e["reason"] == "DefragmentationNotPossible"]

        wait_for(answered, timeout_s=TIMEOUT, what="PlanMigrations to answer")
        wait_defrag_runs(process, 3)  # each asks the planner again: still one Event
        said = answered()
        assert len(said) == 1 and said[0]["involvedObject"]["name"] == "train", said
        assert "Cannot plan migrations" not in process.log_tail(400)


def _whole_gpu_pod(name: str, gpus: int) -> dict[str, Any]:
    whole = {names.NVIDIA_GPU: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": names.SCHEDULER_NAME,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": whole, "limits": whole}}],
        },
    }


def _unschedulable(client: Client, namespace: str, name: str) -> bool:
    pod = client.resource(PODS).get(name, namespace=namespace)
    return any(
        c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )
