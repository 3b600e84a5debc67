"""The controller as a process: its endpoints, a clean stop, and a crash (kill -9) in the middle of
work after which a fresh process converges with nothing lost."""

from collections.abc import Callable

import pytest

from apis.extension import names
from cli.launchers.controller import ControllerProcess
from kube.client import Client
from tests.integration.controller.nodes import build, create_node, managed, node_resources, put_device
from tests.support.cluster import unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def test_health_readiness_and_metrics_endpoints(start_controller: Callable[..., ControllerProcess]) -> None:
    controller = start_controller()
    assert controller.get("/healthz") == (200, "ok\n")
    status, body = controller.get("/readyz?verbose")
    assert status == 200
    assert "[+]informer-sync ok" in body and "[+]shutdown ok" in body
    assert controller.get("/nope")[0] == 404
    series = {name for name, _ in controller.metrics()}
    assert {
        "tessera_controller_reconcile_total",
        "tessera_controller_reconcile_duration_seconds_bucket",
        "tessera_controller_workqueue_depth",
        "tessera_controller_workqueue_adds_total",
        "tessera_controller_workqueue_retries_total",
        "tessera_controller_workqueue_queue_duration_seconds_bucket",
        "tessera_controller_node_writes_total",
        "tessera_controller_leader",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
    } <= series
    assert controller.metric("tessera_controller_leader") == 1  # no election: it always runs


def test_sigterm_stops_it_cleanly(start_controller: Callable[..., ControllerProcess]) -> None:
    controller = start_controller()
    assert controller.terminate() == 0
    assert '"Stopped"' in controller.log_tail()


def test_killed_mid_way_a_restarted_controller_converges(
    client: Client, start_controller: Callable[..., ControllerProcess]
) -> None:
    nodes = [unique("crash") for _ in range(40)]
    for node in nodes:
        create_node(client, node)
    first = start_controller()
    for node in nodes[:20]:
        put_device(client, build(node))
    wait_for(lambda: names.GPU_CORE in node_resources(client, nodes[0]), what="the first node to converge")
    first.kill()  # wherever it was in its queue
    # While no controller runs, the world changes: new Devices, a GPU dies, a node loses everything.
    for node in nodes[20:]:
        put_device(client, build(node))
    put_device(client, build(nodes[1], unhealthy=(0, 1)))
    put_device(client, build(nodes[2], unhealthy=tuple(range(8)), unhealthy_rdma=(0, 1, 2, 3)))
    second = start_controller()

    def gpu_core(node: str) -> str | None:
        return managed(node_resources(client, node)).get(names.GPU_CORE)

    wait_for(lambda: gpu_core(nodes[1]) == "600", what="the dead GPUs to be taken off")
    wait_for(lambda: managed(node_resources(client, nodes[2])) == {}, what="the all-unhealthy node to lose everything")
    wait_for(lambda: all(gpu_core(n) == "800" for n in [nodes[0], *nodes[3:]]), what="every other node to converge")
    assert second.get("/healthz")[0] == 200
