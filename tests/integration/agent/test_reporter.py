"""The Device CR reporter against a real `tessera apiserver` process (over HTTP)."""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry

from agent.devices.cr import build_device
from agent.devices.reporter import DeviceReporter, SyncResult
from agent.discovery.model import Inventory
from agent.discovery.simulated import load_profile
from agent.health.clock import ManualClock
from agent.health.tracker import HealthTracker
from apis.crds.device import Device
from apis.extension import names
from cli.launchers.apiserver import EmbeddedAPIServer
from kube.backoff import Backoff
from kube.client import Client
from kube.resources import NODES
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


class Node:
    """One simulated node's inventory and health, and a reporter for it; `name` is unique per test."""

    def __init__(
        self,
        client: Client,
        registry: CollectorRegistry | None = None,
        *,
        name: str = "",
        on_first_read: Callable[[Device | None], None] | None = None,
    ) -> None:
        self.name = name or f"node-{uuid.uuid4().hex[:8]}"
        self.client = client
        self.inventory: Inventory = load_profile("t4-2x").inventory(self.name)
        self.tracker = HealthTracker(ManualClock())
        self.builds = 0
        self.reporter = DeviceReporter(
            client,
            node_name=self.name,
            build=self.build,
            registry=registry,
            resync_interval_s=3600,
            backoff=Backoff(initial=0.05, maximum=0.5),
            on_first_read=on_first_read,
        )

    def build(self, node_uid: str) -> Device:
        self.builds += 1
        return build_device(self.inventory, self.tracker.snapshot(), node_name=self.name, node_uid=node_uid)

    def register(self) -> str:
        node = self.client.resource(NODES).create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name}})
        return str(node["metadata"]["uid"])

    def cr(self) -> dict[str, object]:
        return self.client.resource(names.DEVICES).get(self.name)

    def device(self) -> Device:
        return Device.from_dict(self.cr())

    def rv(self) -> str:
        return self.device().meta.resource_version

    def break_gpu(self, minor: int = 1) -> None:
        self.tracker.fault(self.inventory.gpus[minor].uuid, reason="Xid79", message="XID 79: fell off the bus")


@pytest.fixture
def node(client: Client) -> Node:
    return Node(client)


def test_creates_the_cr_owned_by_its_node(node: Node) -> None:
    uid = node.register()
    assert node.reporter.sync() is SyncResult.CREATED
    device = node.device()
    assert device.devices == node.build(uid).devices
    assert device.meta.labels[names.LABEL_SIMULATED] == "true"
    ((owner,),) = [device.meta.owner_references]
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Node", node.name, uid, True)


def test_nothing_changed_means_no_write(node: Node) -> None:
    node.register()
    node.reporter.sync()
    rv = node.rv()
    assert node.reporter.sync(full=True) is SyncResult.UNCHANGED  # read, compared, nothing sent
    assert node.reporter.sync(full=False) is SyncResult.SKIPPED  # not even a read
    assert node.rv() == rv


def test_a_health_change_is_one_update(node: Node) -> None:
    node.register()
    node.reporter.sync()
    rv = node.rv()
    node.break_gpu(1)
    assert node.reporter.sync(full=False) is SyncResult.UPDATED
    gpu = node.device().devices[1]
    assert (gpu.health, gpu.resources, gpu.conditions[0].reason) == (False, {}, "Xid79")
    assert node.rv() != rv
    assert node.reporter.sync(full=False) is SyncResult.SKIPPED


def test_a_concurrent_write_is_retried_and_others_metadata_is_kept(node: Node, client: Client) -> None:
    node.register()
    node.reporter.sync()
    devices = client.resource(names.DEVICES)
    # Someone else writes in between: the reporter's next PUT carries a stale resourceVersion (409).
    devices.patch(node.name, {"metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}}})
    node.break_gpu(0)
    assert node.reporter.sync(full=False) is SyncResult.UPDATED
    device = node.device()
    assert not device.devices[0].health
    assert device.meta.labels["team"] == "a" and device.meta.annotations == {"note": "x"}
    assert device.meta.labels[names.LABEL_GPU_MODEL] == "Tesla-T4"


def test_someone_elses_change_to_owned_parts_is_undone_on_a_full_pass(node: Node, client: Client) -> None:
    node.register()
    node.reporter.sync()
    devices = client.resource(names.DEVICES)
    devices.patch(node.name, {"metadata": {"labels": {names.LABEL_GPU_MODEL: "H100"}}, "spec": {"devices": []}})
    assert node.reporter.sync(full=True) is SyncResult.UPDATED
    device = node.device()
    assert len(device.devices) == 2 and device.meta.labels[names.LABEL_GPU_MODEL] == "Tesla-T4"


def test_a_deleted_cr_is_created_again(node: Node, client: Client) -> None:
    node.register()
    node.reporter.sync()
    client.resource(names.DEVICES).delete(node.name)
    node.break_gpu(0)
    assert node.reporter.sync(full=False) is SyncResult.CREATED  # the optimistic PUT found it gone
    assert not node.device().devices[0].health


def test_a_malformed_cr_on_the_server_is_replaced(node: Node, client: Client, caplog: pytest.LogCaptureFixture) -> None:
    node.register()
    broken = {
        "apiVersion": names.DEVICES.api_version,
        "kind": names.DEVICES.kind,
        # An NVLink annotation naming a GPU the Device lacks: what the CRD's schema cannot refuse
        # (a mistyped minor it does).
        "metadata": {
            "name": node.name,
            "labels": {"team": "a"},
            "annotations": {names.ANNOTATION_GPU_NVLINK_PEERS: '{"0": [7]}'},
        },
        "spec": {"devices": [{"type": "gpu", "minor": 0, "health": True}]},
    }
    client.resource(names.DEVICES).create(broken)
    with caplog.at_level(logging.WARNING, logger="agent.devices.reporter"):
        assert node.reporter.sync() is SyncResult.UPDATED
    assert "Device CR on the API server is malformed; replacing it" in caplog.messages
    device = node.device()
    assert len(device.devices) == 2 and device.meta.labels["team"] == "a"


def test_the_owner_reference_is_added_once_the_node_exists(node: Node) -> None:
    assert node.reporter.sync() is SyncResult.CREATED
    assert node.device().meta.owner_references == ()
    assert node.reporter.sync(full=False) is SyncResult.SKIPPED  # no Node yet: still nothing to change
    uid = node.register()
    assert node.reporter.sync(full=False) is SyncResult.UPDATED  # the Node is read while its uid is unknown
    assert [o.uid for o in node.device().meta.owner_references] == [uid]


def test_the_cr_an_earlier_agent_left_is_read_before_the_first_write(client: Client) -> None:
    earlier = Node(client)
    earlier.register()
    earlier.break_gpu(1)
    earlier.reporter.sync()
    left = earlier.device()
    seen: list[tuple[Device | None, int]] = []
    later = Node(client, name=earlier.name, on_first_read=lambda cr: seen.append((cr, later.builds)))
    assert later.reporter.sync() is SyncResult.UPDATED  # this tracker knows nothing: it reports GPU 1 healthy
    assert seen == [(left, 0)]  # but only after it was handed what was there, before building anything
    later.reporter.sync()
    assert len(seen) == 1


def test_a_new_node_has_no_cr_to_read_first(client: Client) -> None:
    seen: list[Device | None] = []
    node = Node(client, on_first_read=seen.append)
    assert node.reporter.sync() is SyncResult.CREATED
    assert seen == [None]


def sample(registry: CollectorRegistry, result: str) -> float:
    return registry.get_sample_value("tessera_agent_device_cr_syncs_total", {"result": result}) or 0.0


@pytest.fixture
def running(client: Client) -> Iterator[Callable[[], tuple[Node, CollectorRegistry]]]:
    started: list[Node] = []

    def start() -> tuple[Node, CollectorRegistry]:
        registry = CollectorRegistry()
        node = Node(client, registry)
        node.tracker.subscribe(lambda device_id, health: node.reporter.wake())
        node.register()
        node.reporter.start()
        started.append(node)
        return node, registry

    yield start
    for node in started:
        node.reporter.stop()


def test_the_loop_pushes_a_health_change_and_measures_it(running: Callable[[], tuple[Node, CollectorRegistry]]) -> None:
    node, registry = running()
    wait_for(lambda: sample(registry, "created"), what="the CR to be created")
    node.break_gpu(1)
    wait_for(lambda: not node.device().devices[1].health, what="GPU 1 to be reported unhealthy")
    wait_for(
        lambda: registry.get_sample_value("tessera_agent_device_cr_report_latency_seconds_count"),
        what="the latency of the write to be recorded",
    )


def test_the_loop_survives_an_api_server_outage_and_catches_up(
    running: Callable[[], tuple[Node, CollectorRegistry]], apiserver: EmbeddedAPIServer
) -> None:
    node, registry = running()
    wait_for(lambda: sample(registry, "created"), what="the CR to be created")
    apiserver.kill()
    try:
        node.break_gpu(0)  # changes while the API server is down ...
        wait_for(lambda: sample(registry, "failed") >= 2, what="the reporter to fail and retry")
        node.break_gpu(1)
    finally:
        apiserver.start()
    # ... are all written once it is back
    wait_for(lambda: [d.health for d in node.device().devices] == [False, False], what="both GPUs reported unhealthy")
    assert node.reporter.alive


def test_an_nvlink_change_is_one_update(node: Node) -> None:
    node.register()
    node.reporter.sync()
    assert node.device().nvlink == {}
    gpus = node.inventory.gpus
    node.inventory = dataclasses.replace(
        node.inventory, gpus=(dataclasses.replace(gpus[0], nvlink_peers=(1,)), *gpus[1:])
    )
    assert node.reporter.sync(full=False) is SyncResult.UPDATED
    annotations = node.cr()["metadata"]["annotations"]
    assert annotations[names.ANNOTATION_GPU_NVLINK_PEERS] == '{"0":[1],"1":[0]}'
    # The linked pair is a GPU partition now, written in the same update.
    assert '{"minors":[0,1],"gpuLinkType":"NVLink","allocationScore":1}' in annotations[names.ANNOTATION_GPU_PARTITIONS]
    assert node.device().nvlink == {0: {1}, 1: {0}}
    assert node.reporter.sync(full=True) is SyncResult.UNCHANGED
