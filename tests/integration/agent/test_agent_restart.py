"""A GPU fault that waits for a reset survives `kill -9` of the agent: real `tessera agent` and
`tessera apiserver` processes.

XID 79 on simulated GPU 3, then the agent is SIGKILLed and started again — once with its state
directory, once with the state file gone (a new DaemonSet pod on a fresh filesystem: the Device CR
is the record) — and a watch on the Device CR shows that GPU 3 never turns healthy or offers
resources, before or after the restarted agent's first report. Then the operator clears it, or
a GPU reset ends it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import uuid
from collections.abc import Iterator

import pytest

from apis.crds.device import Device, DeviceInfo, DeviceType
from apis.extension import names
from cli.launchers.agent import AgentProcess
from cli.launchers.apiserver import EmbeddedAPIServer
from kube.client import Client
from kube.resources import EVENTS, WatchEvent
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

BROKEN = 3
SYNCS = "tessera_agent_device_cr_syncs_total"
QUIET_S = "2"  # after a reset, healthy again this soon


@pytest.fixture
def agent(apiserver: EmbeddedAPIServer) -> Iterator[AgentProcess]:
    node = f"sim-restart-{uuid.uuid4().hex[:6]}"
    args = [
        *("--simulate-devices", "a100-8x", "--simulate-kubelet"),
        *("--device-resync-interval", "0.25", "--health-quiet-period", QUIET_S),
    ]
    with AgentProcess(apiserver.kubeconfig, node_name=node, args=args) as agent:
        yield agent


def gpu(client: Client, node: str, minor: int = BROKEN) -> DeviceInfo | None:
    try:
        cr = Device.from_dict(client.resource(names.DEVICES).get(node))
    except Exception:
        return None
    return next(d for d in cr.of_type(DeviceType.GPU) if d.minor == minor)


def wait_gpu(client: Client, node: str, *, healthy: bool, what: str) -> DeviceInfo:
    """GPU 3 once the CR shows it healthy (or not)."""

    def check() -> DeviceInfo | None:
        found = gpu(client, node)
        return found if found is not None and found.health is healthy else None

    found = wait_for(check, what=what)
    assert found is not None
    return found


def node_events(client: Client, node: str, reason: str) -> list[str]:
    listed = client.resource(EVENTS).list(namespace="default", field_selector=f"involvedObject.name={node}")
    return [e["message"] for e in listed.items if e["reason"] == reason]


def kill_and_restart(agent: AgentProcess, client: Client, *, forget_state: bool) -> list[DeviceInfo]:
    """SIGKILL the agent (no chance to clean up), start it again and wait for its first full
    report; GPU 3 as every change of the Device CR from the kill on showed it."""
    pid = agent.pid
    assert pid is not None
    devices = client.resource(names.DEVICES)
    rv = devices.get(agent.node_name)["metadata"]["resourceVersion"]
    events: list[WatchEvent] = []
    stream = devices.watch(resource_version=rv, field_selector=f"metadata.name={agent.node_name}")
    watcher = threading.Thread(target=lambda: events.extend(stream), daemon=True)
    watcher.start()
    try:
        os.kill(pid, signal.SIGKILL)
        assert agent.wait_exit(30) == -signal.SIGKILL
        before = gpu(client, agent.node_name)
        assert before is not None and not before.health and before.resources == {}  # before the first report
        if forget_state:
            for path in agent.state_dir.iterdir():
                path.unlink()
        agent.start()
        wait_for(
            lambda: (agent.metric(SYNCS, result="unchanged") or 0) + (agent.metric(SYNCS, result="updated") or 0) >= 2,
            what="the restarted agent's first reports",
        )
    finally:
        stream.close()
        watcher.join(10)
    seen = [Device.from_dict(e.object) for e in events if e.type in ("ADDED", "MODIFIED")]
    return [before, *(d for cr in seen for d in cr.of_type(DeviceType.GPU) if d.minor == BROKEN)]


def fall_off_the_bus(agent: AgentProcess, client: Client) -> DeviceInfo:
    """XID 79 on GPU 3; the GPU as the Device CR shows it then."""
    node = agent.node_name
    wait_gpu(client, node, healthy=True, what="GPU 3 healthy in the CR")
    agent.inject("xid", minor=BROKEN, xid=79)
    broken = wait_gpu(client, node, healthy=False, what="GPU 3 unhealthy")
    assert (broken.resources, broken.conditions[0].reason) == ({}, "Xid79")
    return broken


def test_a_reset_xid_survives_kill_9_until_an_operator_clears_it(agent: AgentProcess, client: Client) -> None:
    node = agent.node_name
    broken = fall_off_the_bus(agent, client)

    # 1. Restarted with its state directory: the file restores the fault; nothing needs writing.
    shown = kill_and_restart(agent, client, forget_state=False)
    assert all(not g.health and g.resources == {} for g in shown), shown
    assert gpu(client, node) == broken  # the same condition, lastTransitionTime included
    assert "Restored a GPU fault from before the agent restarted" in agent.log_text()
    wait_for(lambda: node_events(client, node, "GPUFaultRestored"), what="a GPUFaultRestored Event on the Node")
    assert "from the state file" in node_events(client, node, "GPUFaultRestored")[0]

    # 2. Restarted on a fresh filesystem: the Device CR restores it, read before the first write.
    shown = kill_and_restart(agent, client, forget_state=True)
    assert all(not g.health and g.resources == {} for g in shown), shown
    assert gpu(client, node) == broken
    wait_for(
        lambda: any("from the Device CR" in m for m in node_events(client, node, "GPUFaultRestored")),
        what="a GPUFaultRestored Event naming the Device CR",
    )
    assert (agent.state_dir / "gpu-faults.json").exists()  # the node has its record again

    # 3. The operator clears it: healthy, offered again, and it stays so across a restart.
    answer = agent.clear_health(minor=BROKEN)
    assert (answer["cleared"], answer["healthy"], answer["was"]) == (True, True, "Xid79")
    cleared = wait_gpu(client, node, healthy=True, what="GPU 3 healthy again")
    assert cleared.resources[names.GPU_CORE] == 100 and cleared.conditions[0].reason == "Cleared"
    wait_for(lambda: node_events(client, node, "GPUFaultCleared"), what="a GPUFaultCleared Event on the Node")
    assert agent.stop() == 0
    agent.start()
    wait_for(lambda: (agent.metric(SYNCS, result="unchanged") or 0) >= 1, what="the restarted agent's first report")
    after = gpu(client, node)
    assert after is not None and after.health and after.resources == cleared.resources  # (the history is not kept)


def test_a_restored_fault_ends_with_a_gpu_reset(agent: AgentProcess, client: Client) -> None:
    node = agent.node_name
    fall_off_the_bus(agent, client)
    shown = kill_and_restart(agent, client, forget_state=False)
    assert all(not g.health for g in shown), shown

    agent.inject("gpu-reset", minor=BROKEN)  # gone for a moment, then answering: a reset
    recovered = wait_gpu(client, node, healthy=True, what="GPU 3 healthy after the quiet period")
    assert recovered.conditions[0].reason == "Recovered" and recovered.resources[names.GPU_CORE] == 100
    assert json.loads((agent.state_dir / "gpu-faults.json").read_text())["faults"] == {}
