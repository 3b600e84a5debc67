"""`tessera agent` as a process beside a `tessera apiserver` process: the acceptance tests of the agent.

One API server and one agent (simulated a100-8x devices, simulated kubelet) serve the module;
tests that need their own agent (shutdown, bad start-up) start one.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from agent.hooks.gpu import ENV_VISIBLE_DEVICES
from apis.crds.device import Device, DeviceType
from apis.errors import ConfigError
from apis.extension import names
from apis.k8s.core import Node
from cli.launchers.agent import AgentProcess
from cli.launchers.apiserver import EmbeddedAPIServer
from kube.client import Client
from kube.resources import LEASES, NAMESPACES, NODES, PODS, WatchEvent
from proto.runtime.v1alpha1 import api_pb2, api_pb2_grpc
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

NODE = "sim-agent-1"
RESYNC_S = "0.25"  # full passes often, so "no write" is tested over many passes


@pytest.fixture(scope="module")
def agent(apiserver: EmbeddedAPIServer) -> Iterator[AgentProcess]:
    with AgentProcess(
        apiserver.kubeconfig,
        node_name=NODE,
        args=[
            "--simulate-devices",
            "a100-8x",
            "--simulate-kubelet",
            "--device-resync-interval",
            RESYNC_S,
            "--discovery-interval",
            RESYNC_S,
        ],
    ) as agent:
        yield agent


def device(client: Client) -> Device | None:
    try:
        return Device.from_dict(client.resource(names.DEVICES).get(NODE))
    except Exception:
        return None


def gpu_health(client: Client, minor: int) -> bool | None:
    cr = device(client)
    if cr is None:
        return None
    return next(d.health for d in cr.of_type(DeviceType.GPU) if d.minor == minor)


def test_the_device_cr_appears_owned_by_the_registered_node(agent: AgentProcess, client: Client) -> None:
    cr = wait_for(lambda: (d := device(client)) is not None and d.meta.owner_references and d, what="the Device CR")
    node = Node.from_dict(client.resource(NODES).get(NODE))
    assert [o.uid for o in cr.meta.owner_references] == [node.meta.uid]
    assert (len(cr.of_type(DeviceType.GPU)), len(cr.of_type(DeviceType.RDMA))) == (8, 4)
    assert cr.meta.labels[names.LABEL_SIMULATED] == "true"
    assert all(d.health for d in cr.devices)


def test_the_node_is_ready_and_its_lease_renewed(agent: AgentProcess, client: Client) -> None:
    node = wait_for(lambda: Node.from_dict(client.resource(NODES).get(NODE)), what="the Node")
    assert node.ready and node.labels[names.LABEL_SIMULATED_KUBELET] == "true"
    assert node.capacity[names.CPU] == 128_000 and node.capacity[names.MEMORY] == 2**40
    lease = client.resource(LEASES).get(NODE, namespace=names.NAMESPACE_NODE_LEASE)
    assert lease["spec"]["holderIdentity"] == NODE


def test_nothing_changed_means_no_write(agent: AgentProcess, client: Client) -> None:
    wait_for(lambda: agent.metric("tessera_agent_device_cr_syncs_total", result="created"), what="the CR")
    wait_for(lambda: (d := device(client)) is not None and d.meta.owner_references, what="the owner reference")
    rv = client.resource(names.DEVICES).get(NODE)["metadata"]["resourceVersion"]
    events: list[WatchEvent] = []
    stream = client.resource(names.DEVICES).watch(resource_version=rv, field_selector=f"metadata.name={NODE}")
    watcher = threading.Thread(target=lambda: events.extend(stream), daemon=True)
    watcher.start()
    passes = agent.metric("tessera_agent_device_cr_syncs_total", result="unchanged") or 0.0
    # Ten full passes: each re-reads the Node and the CR and finds nothing to write.
    wait_for(
        lambda: (agent.metric("tessera_agent_device_cr_syncs_total", result="unchanged") or 0) >= passes + 10,
        what="ten resync passes",
    )
    stream.close()
    watcher.join(10)
    assert client.resource(names.DEVICES).get(NODE)["metadata"]["resourceVersion"] == rv
    assert [e.type for e in events if e.type != "BOOKMARK"] == []


def test_a_simulated_xid_reaches_the_cr(agent: AgentProcess, client: Client) -> None:
    wait_for(lambda: gpu_health(client, 3) is True, what="GPU 3 healthy in the CR")
    injected = time.monotonic()
    answer = agent.inject("xid", minor=3, xid=79)
    wait_for(lambda: gpu_health(client, 3) is False, what="GPU 3 unhealthy in the CR")
    seen = time.monotonic() - injected
    gpu = next(d for d in device(client).devices if d.type is DeviceType.GPU and d.minor == 3)  # type: ignore[union-attr]
    assert (gpu.id, gpu.resources, gpu.conditions[0].reason) == (answer["uuid"], {}, "Xid79")
    labels = {"minor": "3", "node": NODE}
    assert agent.metric("tessera_gpu_healthy", **labels) == 0.0
    assert agent.metric("tessera_gpu_xid_errors_total", xid="79", **labels) == 1.0
    print(f"XID injected -> Device CR unhealthy, seen by a polling client: {seen * 1000:.0f} ms")


def test_an_application_xid_changes_nothing(agent: AgentProcess, client: Client) -> None:
    wait_for(lambda: gpu_health(client, 6) is True, what="GPU 6 healthy in the CR")
    agent.inject("xid", minor=6, xid=13)
    labels = {"minor": "6", "node": NODE, "xid": "13"}
    wait_for(lambda: agent.metric("tessera_gpu_xid_errors_total", **labels), what="the XID to be counted")
    assert gpu_health(client, 6) is True


def test_a_pod_bound_to_the_node_becomes_running(agent: AgentProcess, client: Client) -> None:
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    client.resource(NAMESPACES).create({"metadata": {"name": namespace}})
    pods = client.resource(PODS)
    pods.create(
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "main", "image": "busybox"}]}},
        namespace=namespace,
    )
    pods.post("p", "binding", {"target": {"kind": "Node", "name": NODE}}, namespace=namespace)
    status = wait_for(
        lambda: (s := pods.get("p", namespace=namespace)["status"]).get("phase") == "Running" and s,
        what="the pod to be Running",
    )
    assert status["containerStatuses"][0]["containerID"].startswith("containerd://")


def test_the_hook_server_injects_allocated_gpus(agent: AgentProcess) -> None:
    # GPUs no other test breaks: the hook server refuses new pods on an unhealthy GPU.
    allocated: dict[str, Any] = {
        "gpu": [
            {"minor": 0, "resources": {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100"}},
            {"minor": 1, "resources": {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100"}},
        ]
    }
    request = api_pb2.ContainerResourceHookRequest(
        pod_meta=api_pb2.PodSandboxMetadata(name="train-0", namespace="default", uid="uid-1"),
        container_meta=api_pb2.ContainerMetadata(name="main"),
        pod_annotations={names.ANNOTATION_DEVICE_ALLOCATED: json.dumps(allocated)},
    )
    with grpc.insecure_channel(f"unix://{agent.hook_socket}") as channel:
        stub = api_pb2_grpc.RuntimeHookServiceStub(channel)
        response = stub.PreCreateContainerHook(request, timeout=10)
        assert response.container_envs[ENV_VISIBLE_DEVICES] == "0,1"
        broken = api_pb2.ContainerResourceHookRequest(
            pod_meta=request.pod_meta, pod_annotations={names.ANNOTATION_DEVICE_ALLOCATED: "{not json"}
        )
        with pytest.raises(grpc.RpcError) as raised:
            stub.PreCreateContainerHook(broken, timeout=10)
        assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert stub.PreCreateContainerHook(request, timeout=10).container_envs[ENV_VISIBLE_DEVICES] == "0,1"


def test_qos_is_off_with_simulated_devices(agent: AgentProcess) -> None:
    assert "Node QoS off: devices are simulated" in agent.log_text()
    assert agent.metric("tessera_agent_be_suppress_cpu_cores") is None


def test_a_malformed_cr_on_the_server_is_replaced(agent: AgentProcess, client: Client) -> None:
    devices = client.resource(names.DEVICES)
    wait_for(lambda: device(client) is not None, what="the CR")
    # The same GPU twice: what the CRD's schema cannot refuse (a mistyped minor it does).
    devices.patch(NODE, {"spec": {"devices": [{"type": "gpu", "minor": 0, "health": True}] * 2}})
    wait_for(lambda: (d := device(client)) is not None and len(d.devices) == 12, what="the CR to be repaired")
    assert "Device CR on the API server is malformed; replacing it" in agent.log_text()


def test_the_agent_survives_an_api_server_outage_and_catches_up(
    agent: AgentProcess, apiserver: EmbeddedAPIServer, client: Client
) -> None:
    wait_for(lambda: gpu_health(client, 5) is True, what="GPU 5 healthy in the CR")
    failed = agent.metric("tessera_agent_device_cr_syncs_total", result="failed") or 0.0
    apiserver.kill()
    try:
        agent.inject("xid", minor=5, xid=79)  # a health change while nobody can be told
        wait_for(
            lambda: (agent.metric("tessera_agent_device_cr_syncs_total", result="failed") or 0) > failed,
            what="the reporter to notice the outage",
        )
        assert agent.get("/healthz")[0] == 200  # the API server's outage is not the agent's
    finally:
        apiserver.start()
    wait_for(lambda: gpu_health(client, 5) is False, what="GPU 5 unhealthy once the API server is back")
    assert agent.running


# --- own processes -------------------------------------------------------------------------------


def test_sigterm_stops_the_agent_cleanly(apiserver: EmbeddedAPIServer) -> None:
    with AgentProcess(
        apiserver.kubeconfig, node_name=f"sim-{uuid.uuid4().hex[:6]}", args=["--simulate-devices", "t4-2x"]
    ) as agent:
        assert agent.hook_socket.exists()
        assert agent.stop() == 0
        assert not agent.hook_socket.exists()
        assert "Agent stopped" in agent.log_text()


def test_a_bad_profile_stops_start_up_with_a_clear_error(apiserver: EmbeddedAPIServer) -> None:
    with (
        pytest.raises(ConfigError, match="not a built-in profile") as raised,
        AgentProcess(apiserver.kubeconfig, node_name="bad", args=["--simulate-devices", "v100-3x"]),
    ):
        pass
    assert "exited with 1" in str(raised.value)


def test_a_second_agent_on_the_same_socket_is_refused(agent: AgentProcess, apiserver: EmbeddedAPIServer) -> None:
    second = AgentProcess(
        apiserver.kubeconfig,
        node_name="second",
        args=["--simulate-devices", "t4-2x", "--hook-socket", str(agent.hook_socket)],
    )
    with pytest.raises(ConfigError, match="another process is already serving on this socket"), second:
        pass
    assert agent.hook_socket.exists() and agent.get("/healthz")[0] == 200  # the first one is unharmed
