"""The simulated kubelet as kubelet's DRA manager, calling the agent's own DRA plugin: one real
`tessera agent --simulate-kubelet --dra-plugin` process against a real `tessera apiserver`.

Claims are allocated and reserved by hand (as the scheduler writes them) on the node's
ResourceSlice; pods are bound by hand. A pod with half a GPU runs once its claim is prepared (the
CDI spec names its GPU and limits); a pod whose claim would overcommit that GPU stays Pending,
`ContainerCreating`, with kubelet's `FailedPrepareDynamicResources` Event; kill -9 of the agent
while the claim is prepared loses nothing and prepares nothing twice; deleting the pod
unprepares its claim before the pod goes, and the waiting pod then runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.kubeletsim.claims import FILE_NAME as KUBELET_CHECKPOINT
from agent.kubeletsim.pods import FAILED_PREPARE
from apis.dra.gpus import DRIVER
from cli.launchers.agent import AgentProcess
from cli.launchers.apiserver import EmbeddedAPIServer
from kube import errors
from kube.client import Client
from kube.resources import EVENTS, PODS
from tests.support.cluster import create_namespace
from tests.support.draobjects import GPU_MEMORY, allocated_claim, dra_agent
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

#: Of its own: the plugin's test (same API server) names its claims alike.
NS = "kubeletsim-dra"
PLUGIN_CHECKPOINT = "dra-claims.json"
#: The plugin's log line for a claim it prepared (not one it answered again from its checkpoint).
PREPARED_LOG = '"Prepared ResourceClaim" '
FAILED_LOG = "Failed to prepare dynamic resources (SIMULATED kubelet)"


@pytest.fixture
def node(apiserver: EmbeddedAPIServer, client: Client, tmp_path: Path) -> Iterator[tuple[str, AgentProcess, Path]]:
    with dra_agent(
        apiserver.kubeconfig, client, tmp_path, "sim-kdra", ["--simulate-kubelet", "--no-hook-server", "--qos", "off"]
    ) as made:
        yield made


def bound_pod(client: Client, node: str, name: str) -> dict[str, Any]:
    """A pod on `node` whose container uses the claim of its own name."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeName": node,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            "containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }
    made: dict[str, Any] = client.resource(PODS).create(pod, namespace=NS)
    return made


def pod_status(client: Client, name: str) -> dict[str, Any]:
    try:
        status: dict[str, Any] = client.resource(PODS).get(name, namespace=NS).get("status") or {}
    except errors.NotFound:
        return {"phase": "gone"}
    return status


def events(client: Client, pod: str) -> list[dict[str, Any]]:
    listed = client.resource(EVENTS).list(namespace=NS, field_selector=f"involvedObject.name={pod}")
    return [e for e in listed.items if e.get("reason") == FAILED_PREPARE]


def checkpoints(agent: AgentProcess) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the plugin's prepared claims, the simulated kubelet's claims) as on disk."""
    plugin = json.loads((agent.state_dir / PLUGIN_CHECKPOINT).read_text())["claims"]
    kubelet = json.loads((agent.state_dir / KUBELET_CHECKPOINT).read_text())["claims"]
    return plugin, kubelet


def test_claims_prepared_before_the_pod_runs_refused_with_an_event_kept_through_kill_9_unprepared_at_the_end(
    node: tuple[str, AgentProcess, Path], client: Client
) -> None:
    name, agent, root = node
    create_namespace(client, NS)
    half_pod = bound_pod(client, name, "half")
    share = {"cores": "50", "memory": str(GPU_MEMORY // 2)}
    half = allocated_claim(client, name, "half", device="gpu-0", share=share, pod=half_pod, namespace=NS)
    wait_for(lambda: pod_status(client, "half").get("phase") == "Running", what="the pod with half a GPU running")

    spec = json.loads((root / "cdi" / f"{DRIVER}-claim_{half.uid}.json").read_text())
    env = dict(e.split("=", 1) for e in spec["containerEdits"]["env"])
    assert env == {
        "NVIDIA_VISIBLE_DEVICES": "0",
        "CUDA_DEVICE_MEMORY_LIMIT_0": str(GPU_MEMORY // 2),
        "CUDA_DEVICE_SM_LIMIT": "50",
    }
    assert [d["name"] for d in spec["devices"]] == [f"{half.uid}-gpu-0"]
    plugin, kubelet = checkpoints(agent)
    assert set(plugin) == set(kubelet) == {half.uid}
    assert kubelet[half.uid]["prepared"] and kubelet[half.uid]["pods"] == [half_pod["metadata"]["uid"]]
    assert kubelet[half.uid]["drivers"][DRIVER][0]["cdiDeviceIDs"] == [f"{DRIVER}/claim={half.uid}-gpu-0"]

    # 60 % of the cores does not fit beside 50 %: kubelet's Event, the pod waits, not running.
    greedy_pod = bound_pod(client, name, "greedy")
    greedy = allocated_claim(
        client,
        name,
        "greedy",
        device="gpu-0",
        share={"cores": "60", "memory": str(GPU_MEMORY // 4)},
        pod=greedy_pod,
        namespace=NS,
    )
    refused = wait_for(
        lambda: [e for e in events(client, "greedy") if f"already held by resourceclaim {NS}/half" in e["message"]],
        what="the FailedPrepareDynamicResources Event naming the holder",
    )
    assert refused[0]["type"] == "Warning" and refused[0]["source"]["component"] == "kubelet"
    assert refused[0]["message"].startswith("Failed to prepare dynamic resources: ")
    status = pod_status(client, "greedy")
    assert status["phase"] == "Pending"
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}

    # kubelet records a claim before it asks: the refused one is known, not prepared.
    plugin, kubelet = checkpoints(agent)
    assert set(plugin) == {half.uid} and set(kubelet) == {half.uid, greedy.uid}
    assert not kubelet[greedy.uid]["prepared"] and kubelet[greedy.uid]["drivers"] == {DRIVER: None}

    # kill -9 with the claim prepared: after the restart nothing is lost, nothing prepared again.
    assert agent.log_text().count(PREPARED_LOG) == 1
    agent.kill()
    failures = agent.log_text().count(FAILED_LOG)
    agent.start()
    wait_for(lambda: agent.log_text().count(FAILED_LOG) > failures, what="the restarted agent retrying greedy")
    assert checkpoints(agent) == (plugin, kubelet)
    assert agent.log_text().count(PREPARED_LOG) == 1
    assert pod_status(client, "half")["phase"] == "Running" and pod_status(client, "greedy")["phase"] == "Pending"

    # Deleting the pod unprepares its claim before the pod goes; the waiting one then runs.
    client.resource(PODS).delete("half", namespace=NS)
    wait_for(lambda: pod_status(client, "half")["phase"] == "gone", what="the deleted pod removed")
    wait_for(lambda: pod_status(client, "greedy").get("phase") == "Running", what="the waiting pod running")
    assert not (root / "cdi" / f"{DRIVER}-claim_{half.uid}.json").exists()
    plugin, kubelet = checkpoints(agent)
    assert set(plugin) == set(kubelet) == {greedy.uid}

    client.resource(PODS).delete("greedy", namespace=NS)
    wait_for(lambda: checkpoints(agent) == ({}, {}), what="every claim unprepared")
    assert list((root / "cdi").iterdir()) == []
