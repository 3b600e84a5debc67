"""DefaultPreemption live: API server and scheduler processes (the default profile, no config),
pods and PodDisruptionBudgets through the API.

A node full of low-priority GPU shares: a high-priority pod that needs a whole GPU gets the
shares of one GPU — the pair whose highest priority is lowest — deleted, is nominated, and is
bound only once they are gone; no device is ever given beyond its capacity. With a budget that
allows no disruption covering the lowest-priority pod, the victim is taken from the node whose
pods no budget protects, although its priority is higher.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apis.extension import allocation, names
from apis.k8s.core import Pod
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess
from kube import Client, resources
from scheduler.simulation.cluster import NodeShape
from tests.support import apiservers
from tests.support.cluster import (
    GPU_HALF,
    PodWatch,
    assert_no_device_shared_beyond_capacity,
    create_gpu_nodes,
    create_namespace,
    create_pod,
    wait_for_event,
)

pytestmark = pytest.mark.integration

ONE_GPU = {names.NVIDIA_GPU: "1"}

apiserver = apiservers.apiserver_fixture("function")


def bound_pod(pods: list[Pod], name: str) -> bool:
    return any(p.name == name and p.node_name for p in pods)


def gpu_of(pod: Pod) -> int:
    """The one GPU a share pod was given (its device-allocated annotation)."""
    (gpu,) = allocation.from_pod_annotations(pod.annotations, obj=pod.key)[allocation.DeviceType.GPU]
    return gpu.minor


def test_a_whole_gpu_pod_preempts_the_lowest_shares_of_one_gpu(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "dp-n1", shape=NodeShape(gpus=2, numa_nodes=1, pcie_per_numa=1))
    ns = create_namespace(client)
    watch = PodWatch(client, ns)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir):
            for priority in (1, 2, 3, 4):
                create_pod(client, ns, f"share{priority}", GPU_HALF, priority=priority)
                watch.wait_bound(priority)
            by_gpu: dict[int, set[str]] = {}
            for pod in watch.pods():
                by_gpu.setdefault(gpu_of(pod), set()).add(pod.name)
            # The victims: the two shares of the GPU whose highest priority is the lowest.
            expected = min(by_gpu.values(), key=lambda names_: max(int(n[-1]) for n in names_))
            assert len(by_gpu) == 2 and len(expected) == 2
            create_pod(client, ns, "urgent", ONE_GPU, priority=100)
            bound = watch.wait_for(lambda pods: bound_pod(pods, "urgent"), "urgent bound")
            assert {p.name for p in bound} == {f"share{p}" for p in (1, 2, 3, 4)} - expected | {"urgent"}
            urgent = watch.pod("urgent")
            assert (urgent.node_name, urgent.nominated_node_name) == ("dp-n1", "dp-n1")
            assert_no_device_shared_beyond_capacity(client, bound)
            first, second = sorted(expected)
            wait_for_event(
                client,
                ns,
                first,
                "Preempted",
                f"Preempted by {ns}/urgent on node dp-n1 (priority preemption, priority 100)",
            )
            listed = f"Preempting 2 pods on dp-n1 (priority preemption): {ns}/{first}, {ns}/{second}"
            wait_for_event(client, ns, "urgent", "Preempting", listed)
    finally:
        watch.stop()


def test_a_budget_that_allows_no_disruption_sends_preemption_to_another_node(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "dp-a", "dp-b", shape=NodeShape(gpus=1, numa_nodes=1, pcie_per_numa=1))
    ns = create_namespace(client)
    pdbs = client.resource(resources.POD_DISRUPTION_BUDGETS)
    pdbs.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": ns},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        },
        namespace=ns,
    )
    pdbs.patch("db", {"status": {"disruptionsAllowed": 0}}, namespace=ns, subresource="status")
    watch = PodWatch(client, ns)
    try:
        with SchedulerProcess(apiserver.kubeconfig, work_dir):
            create_pod(client, ns, "db", ONE_GPU, labels={"app": "db"}, priority=1)
            watch.wait_bound(1)
            create_pod(client, ns, "web", ONE_GPU, labels={"app": "web"}, priority=2)
            watch.wait_bound(2)
            web_node = watch.pod("web").node_name
            # Without the budget `db` (priority 1) would go; with it, `web` (priority 2) does.
            create_pod(client, ns, "urgent", ONE_GPU, priority=100)
            bound = watch.wait_for(lambda pods: bound_pod(pods, "urgent"), "urgent bound")
            assert {p.name for p in bound} == {"db", "urgent"}
            assert watch.pod("urgent").node_name == web_node
    finally:
        watch.stop()
