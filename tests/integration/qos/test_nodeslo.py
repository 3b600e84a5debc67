"""The NodeSLO object configures a real agent's QoS live: `tessera apiserver` + `tessera agent` processes.

The agent runs QoS (`--qos on`) on a scratch kubepods tree in the real cgroup v1 hierarchy
(`--cgroup-root`, the `real_tree` fixture) with BE CPU suppression at threshold 0, so the BE
quota it writes is exactly the floor, `cpuSuppressMinPercent` of the node: each config in force is
visible as one number in the BestEffort cgroup's cpu.cfs_quota_us and in
`tessera_agent_be_suppress_cpu_cores`. The `--qos-config` file says 20 %; NodeSLO objects say
other percents. Waits are bounded polls on what the agent writes, never fixed sleeps.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from agent.qos import convert, knobs
from agent.qos.scratch import ScratchTree
from apis.extension import names
from apis.extension.qos import KubeQoSClass
from cli.launchers.agent import AgentProcess
from cli.launchers.apiserver import EmbeddedAPIServer
from kube import errors
from kube.client import Client
from kube.resources import EVENTS
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.root]

FILE_PERCENT = 20
#: The CFS period the agent writes quotas for (100 ms), in microseconds per CPU.
PERIOD_US = 100_000
#: The agent's node capacity (psutil's logical CPUs), in milli-CPU.
CAPACITY_MILLI = (psutil.cpu_count(logical=True) or 1) * 1000


def suppression(min_percent: int, **extra: object) -> dict[str, Any]:
    """resourceUsedThresholdWithBE: suppression on, threshold 0 → BE gets exactly its floor."""
    return {"enable": True, "cpuSuppressThresholdPercent": 0, "cpuSuppressMinPercent": min_percent, **extra}


def quota_for(percent: int) -> int:
    return CAPACITY_MILLI * percent // 100 * PERIOD_US // 1000


def nodeslo(node: str, threshold: dict[str, Any], resource_version: str = "") -> dict[str, Any]:
    metadata = {"name": node, **({"resourceVersion": resource_version} if resource_version else {})}
    return {
        "apiVersion": names.NODE_SLOS.api_version,
        "kind": names.NODE_SLOS.kind,
        "metadata": metadata,
        "spec": {"resourceUsedThresholdWithBE": threshold},
    }


class Node:
    """One agent process on a scratch kubepods tree, and its NodeSLO object."""

    def __init__(self, apiserver: EmbeddedAPIServer, client: Client, tree: ScratchTree, tmp_path: Path) -> None:
        self.name = f"nodeslo-{uuid.uuid4().hex[:8]}"
        self.client = client
        self.tree = tree
        self.be_root = tree.kube.qos_dir(KubeQoSClass.BEST_EFFORT)
        self.file = tmp_path / "nodeslo.yaml"
        self.file.write_text(json.dumps({"resourceUsedThresholdWithBE": suppression(FILE_PERCENT)}))
        self.agent = AgentProcess(
            apiserver.kubeconfig,
            node_name=self.name,
            args=[
                *("--simulate-devices", "a100-8x", "--qos", "on", "--cgroup-root", tree.base.rel),
                *("--qos-config", str(self.file)),
            ],
        )
        self.api = client.resource(names.NODE_SLOS)

    def quota(self) -> int:
        """The BestEffort cgroup's CFS quota in us per 100 ms (-1: unlimited)."""
        limit = self.be_root.read(knobs.CPU_MAX)
        return -1 if limit.unlimited else limit.quota * PERIOD_US // limit.period

    def wait_quota(self, percent: int, what: str) -> None:
        wanted = quota_for(percent)
        wait_for(lambda: self.quota() == wanted, what=f"BE quota {wanted} us ({percent} %): {what}")
        cores = self.agent.metric("tessera_agent_be_suppress_cpu_cores")
        assert cores == pytest.approx(wanted / PERIOD_US), "the metric shows the quota written"

    def source(self) -> str:
        for source in ("nodeslo", "file", "defaults"):
            if self.agent.metric("tessera_agent_qos_config_source", source=source) == 1:
                return source
        return "none"

    def put(self, threshold: dict[str, Any]) -> None:
        """Create or replace the node's NodeSLO."""
        try:
            current = self.api.get(self.name)
        except errors.NotFound:
            self.api.create(nodeslo(self.name, threshold))
            return
        self.api.update(nodeslo(self.name, threshold, current["metadata"]["resourceVersion"]))

    def events(self) -> list[dict[str, Any]]:
        selector = f"involvedObject.kind={names.NODE_SLOS.kind},involvedObject.name={self.name}"
        return self.client.resource(EVENTS).list_all(namespace="default", field_selector=selector).items


@pytest.fixture
def node(apiserver: EmbeddedAPIServer, client: Client, real_tree: ScratchTree, tmp_path: Path) -> Iterator[Node]:
    node = Node(apiserver, client, real_tree, tmp_path)
    yield node
    node.agent.cleanup()
    with contextlib.suppress(errors.NotFound):
        node.api.delete(node.name)


def test_creating_updating_breaking_and_deleting_the_nodeslo_changes_what_the_agent_applies(node: Node) -> None:
    with node.agent:
        node.wait_quota(FILE_PERCENT, "no NodeSLO: the file")

        node.put(suppression(5))
        node.wait_quota(5, "the NodeSLO, created, beats the file")
        assert node.source() == "nodeslo"

        node.put(suppression(10))
        node.wait_quota(10, "the NodeSLO, updated, applies without a restart")

        # A typo in a value the CRD's schema cannot refuse (a free string, as in Koordinator's CRD);
        # a typo in a field name would be pruned by the API server, as in a real cluster.
        node.put(suppression(30, cpuSuppressPolicy="cfsQouta"))
        [event] = wait_for(node.events, what="a Warning event on the NodeSLO")
        assert (event["type"], event["reason"]) == ("Warning", "FailedParsing")
        assert "spec.resourceUsedThresholdWithBE.cpuSuppressPolicy: must be cfsQuota or cpuset" in event["message"]
        assert node.agent.metric("tessera_agent_qos_config_rejected_total", source="nodeslo") == 1
        # Lift the BE limit behind the agent's back: its next step writes what the config in force
        # says — the last good NodeSLO's 10 %, not the broken version's 30 %.
        node.be_root.write(knobs.CPU_MAX, knobs.CPUMax(convert.UNLIMITED))
        wait_for(lambda: node.quota() != -1, what="the agent to write the BE quota again")
        assert node.quota() == quota_for(10)
        assert node.source() == "nodeslo"
        assert "cpuSuppressPolicy: must be cfsQuota or cpuset" in node.agent.log_text()

        node.api.delete(node.name)
        node.wait_quota(FILE_PERCENT, "the NodeSLO deleted: back to the file")
        assert node.source() == "file"


def test_a_nodeslo_that_exists_at_start_up_is_in_force_from_the_first_decision(node: Node) -> None:
    node.put(suppression(5))
    with node.agent:  # ready: QoS has decided, with the NodeSLO listed first
        node.wait_quota(5, "the NodeSLO, not the file")
        assert node.source() == "nodeslo"
        log = node.agent.log_text()
        assert '"Node QoS config" source="nodeslo"' in log and "QoS config changed" not in log  # no switch
