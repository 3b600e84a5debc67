"""A broken GPU stays out of the node's allocatable when its agent is killed: `tessera up` with one
simulated 8-GPU node, XID 79 on GPU 3 (gpu-core 800 -> 700), `kill -9` of the node's agent, which
`tessera up` restarts. A watch on the Node (through the official client) sees gpu-core 700 in
every version of it until the operator clears the fault; then 800 again.
"""

from __future__ import annotations

import os
import signal
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import kubernetes
import pytest
import urllib3
from prometheus_client.parser import text_string_to_metric_families

from apis.extension import names
from tests.e2e.checks import allocatable_problems
from tests.support.up import Cluster, Up
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

TIMEOUT_S = 180.0
NODE = "sim-1"
AGENT = f"agent/{NODE}"
BROKEN = 3


@pytest.fixture
def up(workdir: Path, start_up: Callable[..., Up]) -> Up:
    return start_up(workdir / "restart", "--nodes", "1", "--profile", "a100-8x", "--no-local-agent")


@pytest.fixture
def cluster(up: Up) -> Iterator[Cluster]:
    with up.cluster() as view:
        yield view


def post(up: Up, path: str, **params: int) -> None:
    status, body = up.ask(AGENT, "POST", f"{path}?{urllib.parse.urlencode(params)}")
    assert status == 200, body


def reports(up: Up) -> float:
    """Device CR passes the (current) agent made that found or wrote its CR; 0 while it does not answer."""
    try:
        status, body = up.ask(AGENT, "GET", "/metrics")
        text = body.decode() if status == 200 else ""
    except OSError:
        return 0.0
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "tessera_agent_device_cr_syncs_total" and s.labels.get("result") in ("unchanged", "updated")
    )


def gpu_core(cluster: Cluster) -> int | None:
    node = cluster.nodes().get(NODE)
    return node.allocatable.get(names.GPU_CORE) if node is not None else None


def test_allocatable_stays_without_the_broken_gpu_across_kill_9_of_the_agent(up: Up, cluster: Cluster) -> None:
    wait_for(
        lambda: gpu_core(cluster) == 800 and not allocatable_problems(cluster.nodes(), cluster.devices()),
        timeout_s=TIMEOUT_S,
        what="sim-1 offering 8 GPUs",
    )
    post(up, "/debug/simulate/xid", minor=BROKEN, xid=79)
    wait_for(lambda: gpu_core(cluster) == 700, timeout_s=TIMEOUT_S, what="gpu-core 700 on sim-1")

    seen: list[int | None] = []
    listing = cluster.core.list_node(field_selector=f"metadata.name={NODE}")
    rv = listing.metadata.resource_version if listing.metadata is not None else None
    watch = kubernetes.watch.Watch()

    def follow() -> None:
        stream = watch.stream(
            cluster.core.list_node, field_selector=f"metadata.name={NODE}", resource_version=rv, timeout_seconds=600
        )
        try:
            for event in stream:
                seen.append(int((event["object"].status.allocatable or {}).get(names.GPU_CORE, "0")))
        except (kubernetes.client.ApiException, urllib3.exceptions.HTTPError, OSError):
            return  # the connection ends with the test's `tessera up`

    watcher = threading.Thread(target=follow, daemon=True)
    watcher.start()
    try:
        killed = up.state().components[AGENT].pid
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        up.wait_restarted(AGENT, killed)
        wait_for(lambda: reports(up) >= 2, timeout_s=TIMEOUT_S, what="the restarted agent's first reports")
        wait_for(lambda: not allocatable_problems(cluster.nodes(), cluster.devices()), what="allocatable settled")
        assert gpu_core(cluster) == 700
        log = Path(up.state().components[AGENT].log).read_text()
        assert "Restored a GPU fault from before the agent restarted" in log

        post(up, "/health/clear", minor=BROKEN)
        wait_for(lambda: gpu_core(cluster) == 800, timeout_s=TIMEOUT_S, what="gpu-core 800 after the clear")
        wait_for(lambda: seen and seen[-1] == 800, what="the watch to see the clear")
    finally:
        watch.stop()
    before_clear = seen[: seen.index(800)]
    assert before_clear and set(before_clear) == {700}, seen  # every Node version from the kill on
