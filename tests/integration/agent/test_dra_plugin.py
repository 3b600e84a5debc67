"""The agent as kubelet's DRA plugin: a real `tessera agent --dra-plugin` and `tessera apiserver`,
called over unix sockets by a kubelet-like client (`agent.kubeletsim.draclient`).

Claims are allocated by hand (as the scheduler writes `status.allocation`) on the node's
ResourceSlice; the plugin registers, prepares a half-GPU share into a CDI spec, refuses a claim
that would overcommit the GPU (naming the holder), survives kill -9 with nothing lost and nothing
prepared twice, and frees the share at unprepare.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.kubeletsim.draclient import ClaimRef, PluginWatcher
from apis.dra.gpus import DRIVER
from cli.launchers.agent import AgentProcess
from cli.launchers.apiserver import EmbeddedAPIServer
from kube.client import Client
from tests.support.draobjects import GPU_MEMORY, allocated_claim, dra_agent
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def node(apiserver: EmbeddedAPIServer, client: Client, tmp_path: Path) -> Iterator[tuple[str, AgentProcess, Path]]:
    with dra_agent(apiserver.kubeconfig, client, tmp_path, "sim-dra", ["--dev-root", str(tmp_path / "dev")]) as made:
        yield made


def test_register_prepare_refuse_survive_kill_and_unprepare(
    node: tuple[str, AgentProcess, Path], client: Client
) -> None:
    name, agent, root = node
    watcher = PluginWatcher(root / "registry")
    plugin = wait_for(lambda: watcher.plugin(DRIVER), what="the agent's DRA plugin registered")
    assert plugin.service == "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
    assert plugin.endpoint == root / "plugin" / "dra.sock"

    half = allocated_claim(client, name, "half", device="gpu-0", share={"cores": "50", "memory": str(GPU_MEMORY // 2)})
    answer = wait_for(
        lambda: (a := plugin.prepare([half]).claims[half.uid]) and not a.error.endswith("retry") and a,
        what="the ledger ready",
    )
    assert not answer.error, answer.error
    (device,) = answer.devices
    assert (device.pool_name, device.device_name, list(device.request_names)) == (name, "gpu-0", ["gpu"])
    assert list(device.cdi_device_ids) == [f"{DRIVER}/claim={half.uid}-gpu-0"]
    assert device.share_id

    spec_file = root / "cdi" / f"{DRIVER}-claim_{half.uid}.json"
    spec = json.loads(spec_file.read_text())
    assert spec["kind"] == f"{DRIVER}/claim"
    env = dict(e.split("=", 1) for e in spec["containerEdits"]["env"])
    assert env == {
        "NVIDIA_VISIBLE_DEVICES": "0",
        "CUDA_DEVICE_MEMORY_LIMIT_0": str(GPU_MEMORY // 2),
        "CUDA_DEVICE_SM_LIMIT": "50",
    }
    assert spec["devices"][0]["containerEdits"]["deviceNodes"] == [
        {"path": "/dev/nvidia0", "hostPath": str(root / "dev" / "nvidia0")}
    ]

    # Idempotent: the same answer again, nothing held twice (the 50 % left still fits 50 %).
    assert plugin.prepare([half]).claims[half.uid] == answer
    more = allocated_claim(client, name, "more", device="gpu-0", share={"cores": "60", "memory": str(GPU_MEMORY // 4)})
    refused = plugin.prepare([more]).claims[more.uid]
    assert not refused.devices
    assert "already held by resourceclaim default/half (50% core" in refused.error, refused.error

    # kill -9 and a new agent: the share is still held, its spec still there, the answer the same.
    agent.kill()
    agent.start()
    watcher = PluginWatcher(root / "registry")
    plugin = wait_for(lambda: watcher.plugin(DRIVER), what="the restarted plugin registered")
    assert spec_file.exists()
    again = wait_for(
        lambda: (a := plugin.prepare([more]).claims[more.uid]) and not a.error.endswith("retry") and a,
        what="the restarted ledger ready",
    )
    assert "already held by resourceclaim default/half" in again.error, again.error
    assert plugin.prepare([half]).claims[half.uid] == answer

    # Unprepare frees it (twice is fine), and the other claim now fits.
    for _ in range(2):
        assert plugin.unprepare([half]).claims[half.uid].error == ""
    assert not spec_file.exists()
    fits = plugin.prepare([more]).claims[more.uid]
    assert not fits.error and [d.device_name for d in fits.devices] == ["gpu-0"]
    assert plugin.unprepare([more]).claims[more.uid].error == ""


def test_unknown_or_replaced_claim_is_an_error_for_that_claim(
    node: tuple[str, AgentProcess, Path], client: Client
) -> None:
    name, _, root = node
    plugin = wait_for(lambda: PluginWatcher(root / "registry").plugin(DRIVER), what="the plugin registered")
    whole = allocated_claim(client, name, "whole", device="gpu-1", share=None)
    ghost = ClaimRef("default", "no-such-claim", str(uuid.uuid4()))
    stale = ClaimRef("default", "whole", str(uuid.uuid4()))
    answer = wait_for(
        lambda: (a := plugin.prepare([whole, ghost, stale])) and not a.claims[whole.uid].error.endswith("retry") and a,
        what="the ledger ready",
    )
    assert not answer.claims[whole.uid].error
    assert answer.claims[ghost.uid].error == "claim default/no-such-claim does not exist"
    assert "deleted and made again" in answer.claims[stale.uid].error
    spec = json.loads((root / "cdi" / f"{DRIVER}-claim_{whole.uid}.json").read_text())
    assert spec["containerEdits"]["env"] == ["NVIDIA_VISIBLE_DEVICES=1"]  # whole GPU: no limits
    assert plugin.unprepare([whole, ghost]).claims[ghost.uid].error == ""
