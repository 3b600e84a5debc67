"""`tessera controller` against the embedded API server, both real processes over HTTP: Device CRs
as the agent writes them become Node allocatable, capacity and labels, and follow every change.

The controller runs with `--resource-max-delay 3600`, so a change that shows up within the test's
timeout was written at once, not after a deferral.
"""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from apis.extension import names
from cli.launchers.controller import ControllerProcess
from kube import crds
from kube.client import Client
from kube.resources import NODES
from tests.integration.controller.nodes import (
    KUBELET_RESOURCES,
    adds,
    build,
    create_node,
    events_about,
    idle,
    managed,
    node_labels,
    node_resources,
    put_device,
    wait_processed,
    writes,
)
from tests.support.cluster import unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

A100_8X = {
    names.GPU_CORE: "800",
    names.GPU_MEMORY: "640Gi",
    names.GPU_MEMORY_RATIO: "800",
    names.KOORD_GPU: "800",
    names.RDMA: "400",
}
H100_8X = {
    names.GPU_CORE: "800",
    names.GPU_MEMORY: "652472Mi",  # 8 x 81559Mi
    names.GPU_MEMORY_RATIO: "800",
    names.KOORD_GPU: "800",
    names.RDMA: "800",
}
#: The A100 node with one GPU unhealthy.
A100_7_GPUS = {
    **A100_8X,
    names.GPU_CORE: "700",
    names.GPU_MEMORY: "560Gi",
    names.GPU_MEMORY_RATIO: "700",
    names.KOORD_GPU: "700",
}
T4_2X = {names.GPU_CORE: "200", names.GPU_MEMORY: "30Gi", names.GPU_MEMORY_RATIO: "200", names.KOORD_GPU: "200"}


@pytest.fixture(scope="module")
def controller(start_controller: Callable[..., ControllerProcess]) -> ControllerProcess:
    return start_controller("--resource-max-delay", "3600")


def wait_resources(client: Client, node: str, want: dict[str, str], field: str = "allocatable") -> None:
    wait_for(lambda: managed(node_resources(client, node, field)) == want, what=f"{field} of {node} to be {want}")


def gpu_labels(client: Client, node: str) -> dict[str, str]:
    return {k: v for k, v in node_labels(client, node).items() if k.startswith(names.NODE_DOMAIN)}


def converged_node(client: Client, profile: str = "a100-8x", want: dict[str, str] = A100_8X) -> str:
    """A new node the controller is done with: it writes the resources first and the labels second,
    so only once both are there will it not write the Node again (a test's read-then-write of the
    Node would otherwise race with the label patch and get a 409)."""
    node = unique(profile.split("-", maxsplit=1)[0])
    create_node(client, node)
    put_device(client, build(node, profile))
    wait_resources(client, node, want)
    wait_for(lambda: gpu_labels(client, node), what=f"the GPU labels of {node}")
    return node


def test_device_crs_become_allocatable_capacity_and_labels(client: Client, controller: ControllerProcess) -> None:
    want = {unique("a100"): ("a100-8x", A100_8X), unique("h100"): ("h100-8x", H100_8X), unique("t4"): ("t4-2x", T4_2X)}
    for node, (profile, _) in want.items():
        create_node(client, node)
        put_device(client, build(node, profile))
    for node, (_, resources) in want.items():
        wait_resources(client, node, resources)
        wait_resources(client, node, resources, "capacity")
        status = node_resources(client, node)
        assert {k: status[k] for k in KUBELET_RESOURCES} == KUBELET_RESOURCES  # kubelet's own: untouched
    t4 = next(n for n in want if n.startswith("t4"))
    wait_for(lambda: gpu_labels(client, t4).get(names.LABEL_GPU_MODEL) == "Tesla-T4", what="the T4 node's labels")
    assert gpu_labels(client, t4) == {
        names.LABEL_GPU_VENDOR: "nvidia",
        names.LABEL_GPU_MODEL: "Tesla-T4",
        names.LABEL_GPU_DRIVER_VERSION: build(t4, "t4-2x").meta.labels[names.LABEL_GPU_DRIVER_VERSION],
    }
    assert names.LABEL_SIMULATED not in node_labels(client, t4)  # only the GPU labels are copied


def test_health_changes_follow_promptly(client: Client, controller: ControllerProcess) -> None:
    node = converged_node(client)
    put_device(client, build(node, unhealthy=(3,)))
    wait_resources(client, node, A100_7_GPUS)
    put_device(client, build(node, unhealthy=(3,), unhealthy_rdma=(0, 1, 2, 3)))
    wait_resources(client, node, {k: v for k, v in A100_7_GPUS.items() if k != names.RDMA})
    put_device(client, build(node, unhealthy=tuple(range(8)), unhealthy_rdma=(0, 1, 2, 3)))
    wait_resources(client, node, {})  # nothing healthy: the names are gone, not zero
    wait_resources(client, node, {}, "capacity")
    assert gpu_labels(client, node)[names.LABEL_GPU_MODEL] == "A100-SXM4-80GB"  # still an A100 node
    put_device(client, build(node))  # everything recovered
    wait_resources(client, node, A100_8X)


def test_a_deleted_device_takes_resources_and_labels_with_it(client: Client, controller: ControllerProcess) -> None:
    node = converged_node(client)
    wait_for(lambda: bool(gpu_labels(client, node)), what="the labels")
    crds.devices(client).delete(node)
    wait_resources(client, node, {})
    wait_for(lambda: gpu_labels(client, node) == {}, what="the labels to go")
    assert node_resources(client, node)["cpu"] == KUBELET_RESOURCES["cpu"]


def test_nothing_is_written_when_nothing_changed(client: Client, controller: ControllerProcess) -> None:
    node = converged_node(client)
    wait_for(lambda: bool(gpu_labels(client, node)), what="the labels")
    wait_for(lambda: idle(controller), what="the controller to settle")
    before_rv = client.resource(NODES).get(node)["metadata"]["resourceVersion"]
    before_writes = writes(controller)
    before_adds = adds(controller)
    # A Device change that does not change what the node offers: a GPU gets another id.
    device = build(node)
    renamed = replace(device.devices[0], id="GPU-renamed")
    put_device(client, replace(device, devices=(renamed, *device.devices[1:])))
    wait_processed(controller, before_adds)
    assert writes(controller) == before_writes
    assert client.resource(NODES).get(node)["metadata"]["resourceVersion"] == before_rv


def test_kubelet_overwriting_the_status_is_corrected(client: Client, controller: ControllerProcess) -> None:
    node = converged_node(client)
    nodes = client.resource(NODES)
    current = nodes.get(node)
    current["status"]["allocatable"] = dict(KUBELET_RESOURCES)  # what kubelet knows of
    current["status"]["capacity"] = dict(KUBELET_RESOURCES)
    nodes.update_status(current)
    wait_resources(client, node, A100_8X)
    wait_resources(client, node, A100_8X, "capacity")


def test_a_device_before_its_node(client: Client, controller: ControllerProcess) -> None:
    node = unique("early")
    put_device(client, build(node))
    create_node(client, node)
    wait_resources(client, node, A100_8X)


def duplicate_first_device(raw: dict[str, Any]) -> dict[str, Any]:
    devices = raw["spec"]["devices"]
    return {**raw, "spec": {"devices": [*devices, devices[0]]}}


def one_sided_nvlink(raw: dict[str, Any]) -> dict[str, Any]:
    meta = {**raw["metadata"], "annotations": {names.ANNOTATION_GPU_NVLINK_PEERS: '{"0": [1]}'}}
    return {**raw, "metadata": meta}


def drop_memory_of_gpu_2(raw: dict[str, Any]) -> dict[str, Any]:
    def without_memory(d: dict[str, Any]) -> dict[str, Any]:
        return {**d, "resources": {k: v for k, v in d["resources"].items() if k != names.GPU_MEMORY}}

    devices = [without_memory(d) if (d["type"], d["minor"]) == ("gpu", 2) else d for d in raw["spec"]["devices"]]
    return {**raw, "spec": {"devices": devices}}


def has_event(client: Client, name: str, kind: str, reason: str) -> bool:
    return any(e["reason"] == reason for e in events_about(client, name, kind))


@pytest.mark.parametrize(
    ("break_it", "reason_text"),
    [
        (one_sided_nvlink, "GPU 0 lists 1 as an NVLink peer, but GPU 1 does not list 0"),
        (drop_memory_of_gpu_2, f"spec.devices[type=gpu,minor=2].resources[{names.GPU_MEMORY}]"),
    ],
    ids=["one-sided-nvlink", "healthy-gpu-without-memory"],
)
def test_a_malformed_device_is_reported_and_the_controller_keeps_serving(
    client: Client,
    controller: ControllerProcess,
    break_it: Callable[[dict[str, Any]], dict[str, Any]],
    reason_text: str,
) -> None:
    node = converged_node(client)
    api = crds.devices(client).api
    api.update(break_it(api.get(node)))
    wait_for(lambda: has_event(client, node, "Node", "MalformedDevice"), what="a MalformedDevice event on the Node")
    wait_for(lambda: has_event(client, node, "Device", "MalformedDevice"), what="a MalformedDevice event on the Device")
    event = next(e for e in events_about(client, node, "Node") if e["reason"] == "MalformedDevice")
    assert reason_text in event["message"], event["message"]
    assert event["type"] == "Warning"
    assert managed(node_resources(client, node)) == A100_8X  # left as it was
    assert controller.get("/healthz")[0] == 200
    converged_node(client)  # other nodes are still served
    put_device(client, build(node, unhealthy=(0,)))  # the agent writes a good one again
    wait_resources(client, node, A100_7_GPUS)


def test_a_gpu_listed_twice_is_left_out_and_the_rest_is_offered(client: Client, controller: ControllerProcess) -> None:
    """Koordinator's schema admits a minor listed twice; which entry is real cannot be known, so
    neither is offered (the scheduler allocates neither and says so: DevicesIgnored)."""
    node = converged_node(client)
    api = crds.devices(client).api
    api.update(duplicate_first_device(api.get(node)))
    wait_resources(client, node, A100_7_GPUS)
    assert controller.get("/healthz")[0] == 200


def test_the_isolation_provider_is_published_and_never_taken_away(
    client: Client, controller: ControllerProcess
) -> None:
    node = converged_node(client, "t4-2x", T4_2X)
    hami = {names.LABEL_GPU_ISOLATION_PROVIDER: names.GPU_ISOLATION_PROVIDER_HAMI_CORE}
    device = build(node, "t4-2x")
    put_device(client, replace(device, meta=replace(device.meta, labels={**device.meta.labels, **hami})))
    wait_for(
        lambda: node_labels(client, node).get(names.LABEL_GPU_ISOLATION_PROVIDER) == "HAMi-core",
        what="the provider label on the Node",
    )
    # The agent no longer sees the library: the label stays (an operator may have put it there,
    # as Koordinator's manual says); the other GPU labels still follow the Device.
    put_device(client, build(node, "t4-2x"))
    wait_for(lambda: idle(controller), what="the controller to settle")
    assert node_labels(client, node)[names.LABEL_GPU_ISOLATION_PROVIDER] == "HAMi-core"
    assert gpu_labels(client, node)[names.LABEL_GPU_MODEL] == "Tesla-T4"
