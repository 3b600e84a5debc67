"""The node lifecycle controller in `tessera kube-controller-manager`, against its own API server
process, with real simulated-kubelet heartbeats that stop and start again.

Its own API server: the controller taints every node whose heartbeat it does not see, and the
session's shared server holds other tests' nodes.
"""

from __future__ import annotations

import contextlib
import datetime
import shutil
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from agent.discovery.simulated import NodeCapacity
from agent.kubeletsim.node import NodeHeartbeat
from apis.extension import names
from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from cli.launchers.kubecontrollers import KubeControllersProcess
from kube import errors
from kube.client import Client
from kube.resources import LEASES, NAMESPACES, NODES, PODS
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0
UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedAPIServer]:
    with run_apiserver() as s:
        yield s


@pytest.fixture(scope="module")
def controllers(
    server: EmbeddedAPIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeControllersProcess]:
    directory = tmp_path_factory.mktemp("kcm")
    flags = ["--node-monitor-grace-period", "3", "--node-monitor-period", "0.5"]
    process = KubeControllersProcess(server.kubeconfig, directory=directory, args=flags)
    process.start()
    yield process
    assert process.terminate() == 0
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def healthy(server: EmbeddedAPIServer) -> Iterator[None]:
    """Two nodes whose heartbeat never stops: one node lost of three is no zone-wide disruption
    (a zone all of whose nodes are lost gets no NoExecute taint)."""
    with server.client() as c:
        beats = [heartbeat(c, f"healthy-{i}") for i in range(2)]
        for beat in beats:
            beat.start()
        yield
        for beat in beats:
            beat.stop()


@pytest.fixture
def client(server: EmbeddedAPIServer) -> Iterator[Client]:
    with server.client() as c:
        yield c


def heartbeat(client: Client, name: str) -> NodeHeartbeat:
    capacity = NodeCapacity(cpus=8, memory_bytes=2**34, pods=110)
    return NodeHeartbeat(client, node_name=name, capacity=capacity, node_ip="10.250.9.9", lease_renew_s=0.3)


def ready_of(obj: dict[str, Any]) -> str:
    return next((c["status"] for c in obj["status"].get("conditions") or () if c["type"] == "Ready"), "")


def taints_of(client: Client, name: str) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in (client.resource(NODES).get(name).get("spec") or {}).get("taints") or ()}


def running_pod(client: Client, namespace: str, name: str, node: str, seconds: int | None) -> dict[str, Any]:
    """A pod bound to `node` and reported Running and Ready, as its kubelet would."""
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "m", "image": "x"}]}
    if seconds is not None:
        spec["tolerations"] = [
            {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
        ]
    client.resource(PODS).create({"metadata": {"name": name}, "spec": spec}, namespace=namespace)
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return client.resource(PODS).patch(name, {"status": status}, namespace=namespace, subresource="status")


def _deleted(client: Client, namespace: str, name: str, uid: str) -> bool:
    """Gone, or being deleted (the embedded API server removes a pod at once: no graceful deletion)."""
    try:
        pod = client.resource(PODS).get(name, namespace=namespace)
    except errors.NotFound:
        return True
    return pod["metadata"]["uid"] != uid or bool(pod["metadata"].get("deletionTimestamp"))


def test_a_silent_node_is_marked_tainted_and_its_pods_evicted_and_it_comes_back(
    controllers: KubeControllersProcess, healthy: None, client: Client
) -> None:
    namespace, node = f"t-{uuid.uuid4().hex[:6]}", f"sim-{uuid.uuid4().hex[:6]}"
    client.resource(NAMESPACES).create({"metadata": {"name": namespace}})
    beat = heartbeat(client, node)
    beat.step()
    beat.start()
    short = running_pod(client, namespace, "short", node, seconds=2)
    running_pod(client, namespace, "default", node, seconds=None)  # the API server's 300 s
    assert ready_of(client.resource(NODES).get(node)) == "True" and not taints_of(client, node)

    beat.stop()  # the machine is gone: no Lease renewal, no status
    wait_for(
        lambda: ready_of(client.resource(NODES).get(node)) == "Unknown",
        timeout_s=TIMEOUT_S,
        what="the node marked Unknown",
    )
    wait_for(
        lambda: taints_of(client, node) == {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")},
        timeout_s=TIMEOUT_S,
        what="the unreachable taints",
    )
    wait_for(
        lambda: ready_of(client.resource(PODS).get("default", namespace=namespace)) == "False",
        timeout_s=TIMEOUT_S,
        what="its pods not ready",
    )
    wait_for(
        lambda: _deleted(client, namespace, "short", short["metadata"]["uid"]),
        timeout_s=TIMEOUT_S,
        what="the pod that tolerates it for 2 s evicted",
    )
    kept = client.resource(PODS).get("default", namespace=namespace)
    assert not kept["metadata"].get("deletionTimestamp")  # it tolerates 300 s
    assert {t.get("tolerationSeconds") for t in kept["spec"]["tolerations"]} == {300}

    beat = heartbeat(client, node)  # back from its reboot
    beat.start()
    try:
        wait_for(
            lambda: ready_of(client.resource(NODES).get(node)) == "True" and not taints_of(client, node),
            timeout_s=TIMEOUT_S,
            what="the node Ready and untainted again",
        )
    finally:
        beat.stop()


def lifecycle_passes(process: KubeControllersProcess) -> float:
    """The node lifecycle controller's passes so far (0 while its /metrics does not answer)."""
    with contextlib.suppress(OSError):
        return process.metric_sum("tessera_kube_controllers_syncs_total", {"controller": "nodelifecycle"}) or 0.0
    return 0.0


def renewed_since(client: Client, node: str, when: datetime.datetime) -> bool:
    """Whether the node's Lease was renewed after `when` (False while the API server does not answer)."""
    with contextlib.suppress(errors.APIError, OSError):
        lease = client.resource(LEASES).get(node, namespace=names.NAMESPACE_NODE_LEASE)
        return datetime.datetime.fromisoformat(lease["spec"]["renewTime"]) > when
    return False


def test_an_api_server_outage_longer_than_the_grace_taints_no_node(
    controllers: KubeControllersProcess, server: EmbeddedAPIServer, client: Client
) -> None:
    node = f"sim-{uuid.uuid4().hex[:6]}"
    beat = heartbeat(client, node)
    beat.step()
    beat.start()
    try:
        server.kill()
        try:
            # The outage itself: longer than the 3 s grace, in the real time of other processes
            # (the controller's clock cannot be moved from here).
            time.sleep(4.0)
        finally:
            server.start()
        back = datetime.datetime.now(datetime.UTC)
        # The danger is the moment the controller sees the API server again, before the kubelet
        # renewed: that ends once the renewal is in and the controller has judged the nodes since.
        wait_for(lambda: renewed_since(client, node, back), timeout_s=TIMEOUT_S, what="the Lease renewed")
        judged = lifecycle_passes(controllers) + 2
        wait_for(lambda: lifecycle_passes(controllers) >= judged, timeout_s=TIMEOUT_S, what="two lifecycle passes")
        assert ready_of(client.resource(NODES).get(node)) == "True" and not taints_of(client, node)
    finally:
        beat.stop()
