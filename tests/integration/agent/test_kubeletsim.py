"""The simulated kubelet against a real `tessera apiserver` process: Node, Lease, pods Running."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from agent.discovery.simulated import NodeCapacity
from agent.kubeletsim import SimulatedKubelet
from agent.kubeletsim.node import KUBELET_VERSION, NodeHeartbeat
from agent.kubeletsim.pods import fake_container_id
from apis.extension import names
from apis.k8s.core import Node, Pod, Taint
from cli.launchers.apiserver import EmbeddedAPIServer
from kube.client import Client
from kube.informer import Informer
from kube.resources import LEASES, NAMESPACES, NODES, PODS, STRATEGIC_MERGE_PATCH
from tests.support.clocks import FakeClock
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

CAPACITY = NodeCapacity(cpus=16, memory_bytes=64 * 2**30, pods=110)


@pytest.fixture
def node_name() -> str:
    return f"sim-{uuid.uuid4().hex[:8]}"


def heartbeat(client: Client, node_name: str, clock: FakeClock) -> NodeHeartbeat:
    return NodeHeartbeat(client, node_name=node_name, capacity=CAPACITY, node_ip="10.250.1.2", clock=clock)


def lease_renew_time(client: Client, node_name: str) -> str:
    return str(client.resource(LEASES).get(node_name, namespace=names.NAMESPACE_NODE_LEASE)["spec"]["renewTime"])


def test_the_node_is_registered_ready_and_marked_simulated(client: Client, node_name: str) -> None:
    registered: list[bool] = []
    beat = NodeHeartbeat(
        client,
        node_name=node_name,
        capacity=CAPACITY,
        node_ip="10.250.1.2",
        on_registered=lambda: registered.append(True),
    )
    beat.step()
    raw = client.resource(NODES).get(node_name)
    node = Node.from_dict(raw)
    assert node.ready and registered == [True]
    assert node.capacity == {names.CPU: 16_000, names.MEMORY: 64 * 2**30, names.PODS: 110}
    assert node.allocatable == node.capacity
    assert node.labels[names.LABEL_SIMULATED_KUBELET] == "true" and node.labels[names.LABEL_HOSTNAME] == node_name
    assert raw["status"]["nodeInfo"]["kubeletVersion"] == KUBELET_VERSION
    assert {"type": "InternalIP", "address": "10.250.1.2"} in raw["status"]["addresses"]
    lease = client.resource(LEASES).get(node_name, namespace=names.NAMESPACE_NODE_LEASE)
    assert lease["spec"]["holderIdentity"] == node_name
    assert lease["metadata"]["ownerReferences"][0]["uid"] == node.meta.uid


def test_the_node_is_created_with_its_taints_and_labels(client: Client, node_name: str) -> None:
    """From its first moment: no pod lands on it before the taint (kubelet's --register-with-taints)."""
    beat = NodeHeartbeat(
        client,
        node_name=node_name,
        capacity=CAPACITY,
        node_ip="10.250.1.2",
        taints=(Taint("pool", "gpu", "NoSchedule"),),
        labels={"pool": "gpu", names.LABEL_HOSTNAME: "not-this"},
    )
    beat.step()
    node = Node.from_dict(client.resource(NODES).get(node_name))
    assert node.taints == (Taint("pool", "gpu", "NoSchedule"),)
    assert node.labels["pool"] == "gpu" and node.labels[names.LABEL_HOSTNAME] == node_name


def test_each_step_renews_the_lease_and_status_is_reported_when_due(client: Client, node_name: str) -> None:
    clock = FakeClock(0.0)
    beat = heartbeat(client, node_name, clock)
    beat.step()
    first = lease_renew_time(client, node_name)
    rv = client.resource(NODES).get(node_name)["metadata"]["resourceVersion"]
    beat.step()
    assert lease_renew_time(client, node_name) > first
    assert client.resource(NODES).get(node_name)["metadata"]["resourceVersion"] == rv  # status not due yet
    clock.now += 61
    beat.step()
    ready = next(c for c in client.resource(NODES).get(node_name)["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and "SIMULATED" in ready["message"]


def test_status_reports_keep_the_resources_and_conditions_others_write(client: Client, node_name: str) -> None:
    clock = FakeClock(0.0)
    beat = heartbeat(client, node_name, clock)
    beat.step()
    gpu = {names.GPU_CORE: "800", names.GPU_MEMORY_RATIO: "800"}  # as the controller writes them
    client.resource(NODES).patch(
        node_name,
        {
            "status": {
                "allocatable": gpu,
                "capacity": gpu,
                "conditions": [{"type": "NetworkUnavailable", "status": "False"}],
            }
        },
        patch_type=STRATEGIC_MERGE_PATCH,
        subresource="status",
    )
    clock.now += 61
    beat.step()
    status = client.resource(NODES).get(node_name)["status"]
    assert status["allocatable"][names.GPU_CORE] == "800" and status["allocatable"][names.CPU] == "16"
    assert {c["type"] for c in status["conditions"]} >= {"Ready", "NetworkUnavailable"}


def test_a_deleted_node_is_registered_again(client: Client, node_name: str) -> None:
    beat = heartbeat(client, node_name, FakeClock(0.0))
    beat.step()
    old = client.resource(NODES).get(node_name)["metadata"]["uid"]
    client.resource(NODES).delete(node_name)
    beat.step()
    node = Node.from_dict(client.resource(NODES).get(node_name))
    assert node.meta.uid != old and node.ready


def test_a_node_marked_not_ready_by_the_node_lifecycle_controller_is_reported_ready_at_once(
    client: Client, node_name: str
) -> None:
    beat = heartbeat(client, node_name, FakeClock(0.0))  # the status report is not due for 60 s
    beat.step()
    unknown = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}
    nodes = client.resource(NODES)
    nodes.patch(
        node_name, {"status": {"conditions": [unknown]}}, patch_type=STRATEGIC_MERGE_PATCH, subresource="status"
    )
    beat.step()
    assert Node.from_dict(nodes.get(node_name)).ready


def test_the_heartbeat_survives_an_api_server_outage(apiserver: EmbeddedAPIServer, node_name: str) -> None:
    with apiserver.client() as client:
        beat = heartbeat(client, node_name, FakeClock(0.0))
        beat.step()
        first = lease_renew_time(client, node_name)
        apiserver.kill()
        try:
            beat.step()  # logged, not raised
        finally:
            apiserver.start()
        beat.step()
        assert lease_renew_time(client, node_name) > first


# --- pods ----------------------------------------------------------------------------------------


@pytest.fixture
def namespace(client: Client) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    client.resource(NAMESPACES).create({"metadata": {"name": name}})
    return name


@pytest.fixture
def kubelet(client: Client, node_name: str) -> Iterator[SimulatedKubelet]:
    informer: Informer[Pod] = Informer(client, PODS, parse=Pod.from_dict, field_selector=f"spec.nodeName={node_name}")
    kubelet = SimulatedKubelet(client, informer, node_name=node_name, capacity=CAPACITY)
    informer.start()
    kubelet.start()
    yield kubelet
    kubelet.stop()
    informer.stop()


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec},
    }


def test_a_pod_bound_to_the_node_becomes_running(
    client: Client, namespace: str, node_name: str, kubelet: SimulatedKubelet
) -> None:
    pods = client.resource(PODS)
    wait_for(lambda: kubelet.node.registered, what="the node to register")
    created = pods.create(pod("p", initContainers=[{"name": "setup", "image": "busybox:1.36"}]), namespace=namespace)
    pods.post("p", "binding", {"target": {"kind": "Node", "name": node_name}}, namespace=namespace)
    running = wait_for(
        lambda: (p := pods.get("p", namespace=namespace))["status"].get("phase") == "Running" and p,
        what="the pod to be Running",
    )
    status = running["status"]
    uid = created["metadata"]["uid"]
    assert status["hostIP"] == kubelet.node.node_ip and status["podIP"].startswith("10.244.")
    assert {c["type"] for c in status["conditions"] if c["status"] == "True"} >= {
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
    }
    (main,) = status["containerStatuses"]
    assert (main["name"], main["ready"], main["containerID"]) == ("main", True, fake_container_id(uid, "main"))
    assert "running" in main["state"] and main["image"] == "busybox:1.36"
    assert status["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert Pod.from_dict(running).container_ids == {"main": fake_container_id(uid, "main")}


def test_pods_of_other_nodes_and_host_network_pods(
    client: Client, namespace: str, node_name: str, kubelet: SimulatedKubelet
) -> None:
    pods = client.resource(PODS)
    pods.create(pod("elsewhere"), namespace=namespace)
    pods.post("elsewhere", "binding", {"target": {"kind": "Node", "name": "another-node"}}, namespace=namespace)
    pods.create(pod("host", hostNetwork=True), namespace=namespace)
    pods.post("host", "binding", {"target": {"kind": "Node", "name": node_name}}, namespace=namespace)
    host = wait_for(
        lambda: (p := pods.get("host", namespace=namespace))["status"].get("phase") == "Running" and p,
        what="the host-network pod to be Running",
    )
    assert host["status"]["podIP"] == kubelet.node.node_ip
    assert pods.get("elsewhere", namespace=namespace)["status"]["phase"] == "Pending"


def test_a_pod_being_deleted_is_removed_with_grace_period_zero(
    client: Client, namespace: str, node_name: str, kubelet: SimulatedKubelet
) -> None:
    pods = client.resource(PODS)
    pods.create({**pod("held"), "metadata": {"name": "held", "finalizers": ["test/hold"]}}, namespace=namespace)
    pods.post("held", "binding", {"target": {"kind": "Node", "name": node_name}}, namespace=namespace)
    wait_for(lambda: pods.get("held", namespace=namespace)["status"].get("phase") == "Running", what="Running")
    pods.delete("held", namespace=namespace)  # a finalizer holds it: only marked
    key = f"{namespace}/held"
    deleting = wait_for(
        lambda: (p := kubelet.pods.informer.store.get(key)) is not None and p.is_deleting,
        what="the kubelet to see the deletion",
    )
    assert deleting
    kubelet.pods.handle(key)  # the kubelet's own delete (grace period 0) is accepted ...
    pods.patch("held", {"metadata": {"finalizers": None}}, namespace=namespace)
    wait_for(lambda: kubelet.pods.informer.store.get(key) is None, what="the pod to go")  # ... and it is gone


def test_a_running_pod_marked_not_ready_while_the_node_was_away_is_ready_again(
    client: Client, namespace: str, node_name: str, kubelet: SimulatedKubelet
) -> None:
    pods = client.resource(PODS)
    pods.create(pod("p"), namespace=namespace)
    pods.post("p", "binding", {"target": {"kind": "Node", "name": node_name}}, namespace=namespace)
    wait_for(lambda: pods.get("p", namespace=namespace)["status"].get("phase") == "Running", what="Running")
    not_ready = {"type": "Ready", "status": "False"}
    pods.patch(
        "p",
        {"status": {"conditions": [not_ready]}},
        namespace=namespace,
        patch_type=STRATEGIC_MERGE_PATCH,
        subresource="status",
    )

    def ready() -> bool:
        conditions = pods.get("p", namespace=namespace)["status"]["conditions"]
        return {c["type"]: c["status"] for c in conditions}.get("Ready") == "True"

    wait_for(ready, what="the pod Ready again")
