"""GPU defragmentation end to end, every part real: the embedded API server, `tessera scheduler`,
`tessera controller`, `tessera kube-controller-manager`, two simulated nodes (`tessera agent
--simulate-devices a100-pcie-4x --simulate-kubelet`) and `tessera descheduler`, each its own
process, talking over HTTP and gRPC on a unix socket.

A Deployment's four 60% pods are scattered two per node (blockers pinned there by a matchFields
node affinity take the other GPUs, then go), so a 4-GPU pod fits nowhere. The descheduler asks
the scheduler's PlanMigrations, creates ReservationFirst PodMigrationJobs, the scheduler places
their Reservations on the planned node, the descheduler evicts only once a Reservation is
Available, the ReplicaSet's replacements land on the Reservations, the jobs Succeed and the big
pod binds. Watched all along: no eviction before Available, no GPU share given twice (Device CRs
against the pods' device-allocated annotations), the Deployment's maxUnavailable (1 of 4).
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from apis.extension import names
from apis.k8s.core import Pod
from cli.bench.scheduler_e2e import check_allocations
from cli.launchers.agent import AgentProcess
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.controller import ControllerProcess
from cli.launchers.descheduler import DeschedulerProcess
from cli.launchers.kubecontrollers import KubeControllersProcess
from cli.launchers.scheduler import SchedulerProcess, pod_manifest
from kube import crds
from kube.client import Client
from kube.informer import Informer, raw
from kube.resources import NODES as NODE_API
from kube.resources import PODS
from tests.integration.descheduler.migrations import TIMEOUT
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

DEPLOYMENTS = names.GroupVersionResource("apps", "v1", "deployments", "Deployment", True)
NODES = ("sim-a", "sim-b")
#: Each of a node's 4 GPUs holds one of these at most (60% + 60% > 100%).
SMALL = {names.GPU_CORE: "60", names.GPU_MEMORY_RATIO: "60"}
REPLICAS = 4


@pytest.fixture
def parts(apiserver: EmbeddedAPIServer) -> Iterator[SchedulerProcess]:
    """Every component but the descheduler (the test starts it once the cluster is fragmented);
    the scheduler, whose gRPC address the descheduler is given."""
    kubeconfig = apiserver.kubeconfig
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="e2e") as work:  # short: socket paths
        directory = Path(work)
        controller = ControllerProcess(kubeconfig, directory=directory / "controller")
        controller.start()
        stack.callback(controller.kill)
        kcm = KubeControllersProcess(kubeconfig, directory=directory / "kcm")
        kcm.start(timeout=TIMEOUT)
        stack.callback(kcm.kill)
        for node in NODES:
            agent = AgentProcess(
                kubeconfig,
                node_name=node,
                directory=directory / node,
                args=["--simulate-kubelet", "--qos", "off", "--simulate-devices", "a100-pcie-4x", "--no-hook-server"],
            )
            agent.start()
            stack.callback(agent.kill)
        scheduler = SchedulerProcess(kubeconfig, directory)
        scheduler.start()
        stack.callback(scheduler.kill)
        yield scheduler


def pinned(name: str, namespace: str, node: str, gpus: int) -> dict[str, Any]:
    """A bare pod of `gpus` whole GPUs that only `node` may take (a matchFields node affinity, as
    the descheduler pins a Reservation)."""
    manifest = pod_manifest(name, {names.NVIDIA_GPU: str(gpus)}, namespace=namespace)
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    manifest["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    return manifest


def deployment(name: str) -> dict[str, Any]:
    template = pod_manifest(name, SMALL)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]},
        },
    }


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


class Watcher:
    """Pod events of one namespace, as they come (an informer): at each, what went wrong so far.

    An eviction is seen when a pod of `app` first shows a deletionTimestamp or goes: its job's
    Reservation must be Available (or Succeeded) by then."""

    def __init__(self, client: Client, namespace: str, app: str) -> None:
        self.client = client
        self.app = app
        self.problems: list[str] = []
        self.most_unavailable = 0
        #: Pod name -> the phase of its job's Reservation when the pod was first seen deleting.
        self.evicted_while: dict[str, str] = {}
        self._lock = threading.Lock()
        self.informer: Informer[dict[str, Any]] = Informer(client, PODS, parse=raw, namespace=namespace)
        self.informer.add_handlers(self._changed, lambda _old, new: self._changed(new), self._gone)

    def __enter__(self) -> Watcher:
        self.informer.start()
        assert self.informer.wait_for_sync(30), "the informer did not sync"
        return self

    def __exit__(self, *exc: object) -> None:
        self.informer.stop()

    def _changed(self, pod: dict[str, Any]) -> None:
        if pod["metadata"].get("deletionTimestamp"):
            self._gone(pod)
        self._look()

    def _gone(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if pod["metadata"].get("labels", {}).get("app") != self.app or name in self.evicted_while:
            return
        jobs = self.client.resource(names.POD_MIGRATION_JOBS).list().items
        job = next((j["metadata"]["name"] for j in jobs if j["spec"]["podRef"].get("name") == name), None)
        phase = "no job"
        if job is not None:
            rsv = self.client.resource(names.RESERVATIONS).list(label_selector=f"{names.LABEL_MIGRATION_JOB}={job}")
            phase = next(((r.get("status") or {}).get("phase", "Pending") for r in rsv.items), "no reservation")
        with self._lock:
            self.evicted_while[name] = phase

    def _look(self) -> None:
        mine = [p for p in self.informer.store.list() if p["metadata"].get("labels", {}).get("app") == self.app]
        serving = [p for p in mine if _ready(p) and not p["metadata"].get("deletionTimestamp")]
        live = [Pod.from_dict(p) for p in self.client.resource(PODS).list().items]
        over = check_allocations(crds.devices(self.client).list(), [p for p in live if not p.is_deleting])
        with self._lock:
            self.most_unavailable = max(self.most_unavailable, REPLICAS - len(serving))
            if over:
                self.problems.append(f"{over} GPU(s) over-committed")


def test_a_pending_four_gpu_pod_binds_after_the_descheduler_moves_two_pods(
    client: Client,
    namespace: str,
    parts: SchedulerProcess,
    start_descheduler: Callable[..., DeschedulerProcess],
) -> None:
    pods = client.resource(PODS)
    wait_for(lambda: _gpu_nodes(client) == len(NODES), timeout_s=TIMEOUT, what="two nodes with GPUs")
    for node in NODES:  # two GPUs of each node taken, so the Deployment lands two pods per node
        pods.create(pinned(f"block-{node}", namespace, node, 2), namespace=namespace)
    wait_for(lambda: _bound(client, namespace, "block-") == 2, timeout_s=TIMEOUT, what="the blockers to bind")
    client.resource(DEPLOYMENTS).create(deployment("web"), namespace=namespace)
    wait_for(lambda: _ready_count(client, namespace, "web") == REPLICAS, timeout_s=TIMEOUT, what="web to be ready")
    per_node = _nodes_of(client, namespace, "web")
    assert sorted(per_node.values()) == [2, 2], per_node
    for node in NODES:
        pods.delete(f"block-{node}", namespace=namespace)
    wait_for(lambda: _bound(client, namespace, "block-") == 0, timeout_s=TIMEOUT, what="the blockers to go")

    pending_at = time.monotonic()
    pods.create(pod_manifest("train", {names.NVIDIA_GPU: "4"}, namespace=namespace), namespace=namespace)
    wait_for(lambda: _unschedulable(client, namespace, "train"), timeout_s=TIMEOUT, what="train to be pending")
    with Watcher(client, namespace, "web") as watcher:
        process = start_descheduler(
            "--scheduler-address", parts.grpc_address, "--defrag-interval", "0.5", "--defrag-min-pending", "0"
        )
        node = wait_for(lambda: _node_of(client, namespace, "train"), timeout_s=2 * TIMEOUT, what="train to bind")
        pending_to_bound = time.monotonic() - pending_at
        wait_for(lambda: _ready_count(client, namespace, "web") == REPLICAS, timeout_s=TIMEOUT, what="web again")
    print(f"train: pending → bound on {node} in {pending_to_bound:.1f} s")  # the measurement, with -s

    jobs = client.resource(names.POD_MIGRATION_JOBS).list().items
    assert len(jobs) == 2 and {(j.get("status") or {}).get("phase") for j in jobs} == {"Succeeded"}, jobs
    assert {j["spec"]["podRef"]["name"] for j in jobs} == set(watcher.evicted_while)
    for j in jobs:  # each replacement where the plan put it (the Reservation's matchFields node affinity)
        assert j["status"]["nodeName"] == j["metadata"]["annotations"][names.ANNOTATION_MIGRATION_TARGET_NODE] != node
    assert set(watcher.evicted_while.values()) <= {"Available", "Succeeded"}, watcher.evicted_while
    assert watcher.problems == []
    assert watcher.most_unavailable <= 1
    # The replacements sit where their Reservations were, and the big pod has a node to itself.
    assert _nodes_of(client, namespace, "web") == {next(n for n in NODES if n != node): REPLICAS}
    # The scheduler marks a Reservation Succeeded once it bound the replacement: a moment after the
    # job saw the replacement bound.
    wait_for(
        lambda: {r["status"]["phase"] for r in client.resource(names.RESERVATIONS).list().items} == {"Succeeded"},
        timeout_s=TIMEOUT,
        what="both Reservations Succeeded",
    )
    assert process.metric("tessera_descheduler_migrations_total", phase="Succeeded") == 2


def _gpu_nodes(client: Client) -> int:
    items = client.resource(NODE_API).list().items
    return sum(1 for n in items if int((n.get("status") or {}).get("allocatable", {}).get(names.GPU_CORE, "0")) > 0)


def _mine(client: Client, namespace: str, prefix: str) -> list[dict[str, Any]]:
    items = client.resource(PODS).list(namespace=namespace).items
    return [p for p in items if p["metadata"]["name"].startswith(prefix)]


def _bound(client: Client, namespace: str, prefix: str) -> int:
    return sum(1 for p in _mine(client, namespace, prefix) if p["spec"].get("nodeName"))


def _ready_count(client: Client, namespace: str, prefix: str) -> int:
    live = [p for p in _mine(client, namespace, prefix) if not p["metadata"].get("deletionTimestamp")]
    return sum(1 for p in live if _ready(p))


def _nodes_of(client: Client, namespace: str, prefix: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in _mine(client, namespace, prefix):
        if node := p["spec"].get("nodeName"):
            out[node] = out.get(node, 0) + 1
    return out


def _node_of(client: Client, namespace: str, name: str) -> str:
    return str(client.resource(PODS).get(name, namespace=namespace)["spec"].get("nodeName") or "")


def _unschedulable(client: Client, namespace: str, name: str) -> bool:
    pod = client.resource(PODS).get(name, namespace=namespace)
    return any(
        c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )
