"""Acceptance on real containerd + runc behind the real proxy: the node refuses colliding devices.

Two rigs: the hook server alone (what it admitted is what it counts), and a `tessera agent`
process against a real API server, restarted so that it knows the running pods only from its
informer — the reported case: a pod claims GPU 0 whole while another holds half of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from cri_api.v1 import api_pb2 as cri

from agent.hooks import DeviceCollisionPlugin, GPUEnvPlugin
from agent.ledger import DeviceLedger, GPUSlot, NodeSlots
from apis.crds.device import Device, DeviceType
from apis.extension import names
from cli.launchers.agent import AgentProcess
from cli.launchers.apiserver import EmbeddedAPIServer
from kube.client import Client
from kube.resources import EVENTS, NAMESPACES, PODS
from tests.integration.runtimeproxy.rig import Rig
from tests.support import containerd
from tests.support.cluster import unique
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.root]

GI = 2**30


def allocated(minor: int, core: int, memory_gi: int) -> dict[str, str]:
    """A `device-allocated` annotation for one GPU share, as the scheduler writes it."""
    resources = {names.GPU_CORE: str(core), names.GPU_MEMORY: f"{memory_gi}Gi", names.GPU_MEMORY_RATIO: str(core)}
    return {names.ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": [{"minor": minor, "resources": resources}]})}


def refusal(kubelet: containerd.CRIClient, pod: str, config: cri.PodSandboxConfig) -> str:
    """Create a container that must be refused; the message kubelet gets."""
    with pytest.raises(grpc.RpcError) as info:
        kubelet.create_container(pod, kubelet.container_config("main"), config)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    return str(info.value.details())


# --- the hook server alone ------------------------------------------------------------------------
def test_the_colliding_container_fails_and_the_others_start(rig: Rig) -> None:
    node = NodeSlots("node-a", {m: GPUSlot(m, f"GPU-{m}", 80 * GI) for m in range(2)}, {})
    rig.hook_server(DeviceCollisionPlugin(DeviceLedger(), node=lambda: node), GPUEnvPlugin())
    rig.proxy()
    kubelet = rig.kubelet()
    half_a, half_a_config = rig.run_pod(kubelet, "half-a", annotations=allocated(0, 50, 40))
    kubelet.run_container(half_a, half_a_config, "main")

    x, x_config = rig.run_pod(kubelet, "x", annotations=allocated(0, 100, 80))
    assert refusal(kubelet, x, x_config) == (
        f"pod default/x: runtime hook PreCreateContainer at {rig.workdir / 'hooks-0.sock'}: FAILED_PRECONDITION: "
        "device-collision: GPU 0 (GPU-0) of node node-a is already held by default/half-a (50% core, 40Gi): "
        "default/x asks for 100% core, 80Gi, 50% core, 40Gi free (failure-policy Fail)"
    )
    assert [c.metadata.name for c in rig.direct.runtime.ListContainers(cri.ListContainersRequest()).containers] == [
        "main"
    ]  # only half-a's: nothing of x reached containerd

    other, other_config = rig.run_pod(kubelet, "other-gpu", annotations=allocated(1, 100, 80))
    assert kubelet.env(kubelet.run_container(other, other_config, "main"))["NVIDIA_VISIBLE_DEVICES"] == "1"
    half_b, half_b_config = rig.run_pod(kubelet, "half-b", annotations=allocated(0, 50, 40))
    assert kubelet.env(kubelet.run_container(half_b, half_b_config, "main"))["NVIDIA_VISIBLE_DEVICES"] == "0"

    # Stopping half-a's pod (PostStopPodSandbox) frees its half, but half-b still holds the other one.
    kubelet.remove_pod(half_a)
    assert "already held by default/half-b (50% core, 40Gi)" in refusal(kubelet, x, x_config)
    kubelet.remove_pod(half_b)
    assert kubelet.env(kubelet.run_container(x, x_config, "main"))["NVIDIA_VISIBLE_DEVICES"] == "0"


# --- a real agent, restarted ----------------------------------------------------------------------
@pytest.fixture
def node_agent(rig: Rig, apiserver: EmbeddedAPIServer) -> Iterator[AgentProcess]:
    """`tessera agent` for a simulated 8 × A100 node (and its simulated kubelet), registered with the proxy."""
    directory = rig.workdir / "agent"
    directory.mkdir()
    args = ["--simulate-devices", "a100-8x", "--simulate-kubelet", "--qos", "off"]
    with AgentProcess(apiserver.kubeconfig, node_name=unique("sim"), args=args, directory=directory) as agent:
        rig.register(agent.hook_socket, policy="Fail")
        yield agent


def make_pod(client: Client, namespace: str, name: str, annotations: dict[str, str], node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}], "schedulerName": "nobody"}
    if node:
        spec["nodeName"] = node
    body = {"metadata": {"name": name, "annotations": annotations}, "spec": spec}
    created: dict[str, Any] = client.resource(PODS).create(body, namespace=namespace)
    return created


def test_after_a_restart_the_agent_refuses_what_collides_with_running_pods(
    rig: Rig, node_agent: AgentProcess, client: Client
) -> None:
    namespace = unique("t")
    client.resource(NAMESPACES).create({"metadata": {"name": namespace}})
    node = node_agent.node_name
    make_pod(client, namespace, "infer-half-a", allocated(0, 50, 40), node=node)

    def running() -> bool:
        return client.resource(PODS).get("infer-half-a", namespace=namespace)["status"].get("phase") == "Running"

    wait_for(running, what="the simulated kubelet to run infer-half-a")
    node_agent.stop()
    node_agent.start()  # what it knows of infer-half-a now comes from its informer alone
    wait_for(lambda: node_agent.get("/readyz")[0] == 200, what="the agent to list its node's pods")
    rig.proxy()
    kubelet = rig.kubelet()

    x_uid = make_pod(client, namespace, "x", allocated(0, 100, 80))["metadata"]["uid"]  # not bound: no kubelet runs it
    config = kubelet.pod_config("x", namespace=namespace, uid=x_uid, annotations=allocated(0, 100, 80))
    x = kubelet.run_pod(config)
    uuid = next(d.id for d in Device.from_dict(client.resource(names.DEVICES).get(node)).of_type(DeviceType.GPU))
    reason = (
        f"GPU 0 ({uuid}) of node {node} is already held by {namespace}/infer-half-a (50% core, 40Gi): "
        f"{namespace}/x asks for 100% core, 80Gi, 50% core, 40Gi free"
    )
    assert f"device-collision: {reason} (failure-policy Fail)" in refusal(kubelet, x, config)

    y_config = kubelet.pod_config("y", namespace=namespace, annotations=allocated(1, 100, 80))
    y = kubelet.run_pod(y_config)
    assert kubelet.env(kubelet.run_container(y, y_config, "main"))["NVIDIA_VISIBLE_DEVICES"] == "1"

    assert node_agent.metric("tessera_agent_device_collisions_total", type="gpu", reason="overcommitted") == 1

    def event() -> dict[str, Any] | None:
        events = client.resource(EVENTS).list(namespace=namespace, field_selector="involvedObject.name=x").items
        return next((e for e in events if e["reason"] == "DeviceCollision"), None)

    recorded = wait_for(event, what="the DeviceCollision event on x")
    assert (recorded["type"], recorded["message"], recorded["involvedObject"]["uid"]) == ("Warning", reason, x_uid)

    client.resource(PODS).delete("infer-half-a", namespace=namespace)  # the simulated kubelet removes it at once

    def admitted() -> str:
        try:
            return kubelet.create_container(x, kubelet.container_config("main"), config)
        except grpc.RpcError:
            return ""

    kubelet.start_container(wait_for(admitted, what="x to be admitted once infer-half-a is gone"))
