"""The agent's ResourceSlices against a real `tessera apiserver` process (over HTTP).

The Device CR reporter with the ResourceSlice writer, as `tessera agent --dra` wires them: the
slices pass kube's validation, match the Device CR device for device, a pass with nothing new
writes nothing, a GPU going unhealthy is tainted in the pass that marks it on the CR, and the
Node owns the slices once it exists. (A node identity confined to its own slices:
test_node_identity.py.)
"""

from __future__ import annotations

import uuid

import pytest
from prometheus_client import CollectorRegistry

from agent.devices.cr import build_device
from agent.devices.reporter import DeviceReporter
from agent.devices.slices import Pool, build_pools
from agent.devices.slicewriter import SliceWriter
from agent.discovery.model import Inventory
from agent.discovery.simulated import load_profile
from agent.health.clock import ManualClock
from agent.health.tracker import HealthTracker
from apis import dra
from apis.crds.device import Device, DeviceType
from apis.dra import gpus, nics
from apis.dra.slice import ResourceSlice
from apis.extension import names
from kube.client import Client
from kube.resources import NODES

pytestmark = pytest.mark.integration


class Node:
    """A simulated node's inventory and health, with the reporter and slice writer of `--dra`."""

    def __init__(self, client: Client, profile: str = "a100-8x") -> None:
        self.name = f"node-{uuid.uuid4().hex[:8]}"
        self.client = client
        self.inventory: Inventory = load_profile(profile).inventory(self.name)
        self.tracker = HealthTracker(ManualClock())
        self.registry = CollectorRegistry()
        self.writer = SliceWriter(client, node_name=self.name, build=self.pools, registry=self.registry)
        self.reporter = DeviceReporter(
            client,
            node_name=self.name,
            build=lambda uid: build_device(self.inventory, self.tracker.snapshot(), node_name=self.name, node_uid=uid),
            registry=self.registry,
            resync_interval_s=3600,
            also=self.writer.sync,
        )

    def pools(self) -> tuple[Pool, Pool]:
        return build_pools(self.inventory, self.tracker.snapshot(), node_name=self.name)

    def slices(self, driver: str = gpus.DRIVER) -> list[ResourceSlice]:
        listed = self.client.resource(dra.RESOURCE_SLICES).list_all(
            field_selector=f"spec.driver={driver},spec.nodeName={self.name}"
        )
        return sorted((ResourceSlice.from_dict(s) for s in listed.items), key=lambda s: s.name)

    def device_cr(self) -> Device:
        return Device.from_dict(self.client.resource(names.DEVICES).get(self.name))

    def writes(self, operation: str) -> float:
        value = self.registry.get_sample_value("tessera_agent_resource_slice_writes_total", {"operation": operation})
        return value or 0.0


@pytest.fixture
def node(client: Client) -> Node:
    return Node(client)


def test_slices_are_published_and_match_the_device_cr(node: Node) -> None:
    node.reporter.sync()
    [gpu_slice] = node.slices(gpus.DRIVER)
    [rdma_slice] = node.slices(nics.DRIVER)
    assert gpu_slice.name.startswith(f"00000-{gpus.DRIVER}-{node.name}-")
    assert (gpu_slice.pool.name, gpu_slice.pool.generation, gpu_slice.pool.resource_slice_count) == (node.name, 1, 1)
    assert gpu_slice.node_name == node.name
    cr = node.device_cr()
    # device for device: each GPU of the CR is one shareable device of its minor and UUID
    by_minor = {gpus.minor_of(d): d for d in gpu_slice.devices}
    cr_gpus = cr.of_type(DeviceType.GPU)
    assert sorted(by_minor) == sorted(d.minor for d in cr_gpus) == list(range(8))
    for d in cr_gpus:
        device = by_minor[d.minor]
        assert device.attributes[gpus.UUID].value == d.id
        assert device.allow_multiple_allocations
        assert device.capacity[gpus.MEMORY].value.amount == d.resources[names.GPU_MEMORY]
        assert not device.taints
    # each RDMA PF of the CR is one device, each of its VFs one more
    cr_rdma = cr.of_type(DeviceType.RDMA)
    pfs = [d for d in rdma_slice.devices if d.attributes[nics.TYPE].value == nics.TYPE_PF]
    assert sorted(d.attributes["resource.kubernetes.io/pciBusID"].value for d in pfs) == sorted(d.id for d in cr_rdma)
    assert len(rdma_slice.devices) == len(cr_rdma) + sum(len(g.vfs) for d in cr_rdma for g in d.vf_groups)
    assert node.writes("create") == 2


def test_a_pass_with_nothing_new_writes_nothing(node: Node) -> None:
    node.reporter.sync()
    before = [s.meta.resource_version for s in node.slices()]
    node.reporter.sync(full=True)  # re-lists: the server's copy equals the wanted one
    node.reporter.sync(full=False)
    assert [s.meta.resource_version for s in node.slices()] == before
    assert (node.writes("update"), node.writes("delete")) == (0, 0)


def test_an_unhealthy_gpu_is_tainted_in_the_pass_that_marks_the_cr(node: Node) -> None:
    node.reporter.sync()
    node.tracker.fault(node.inventory.gpus[3].uuid, reason="Xid79", message="XID 79: fell off the bus")
    node.reporter.sync(full=False)  # one pass, as a wake from the health tracker runs
    assert next(d for d in node.device_cr().devices if d.minor == 3 and d.type is DeviceType.GPU).health is False
    [gpu_slice] = node.slices()
    tainted = {d.name: d.taints for d in gpu_slice.devices if d.taints}
    assert list(tainted) == ["gpu-3"]
    [taint] = tainted["gpu-3"]
    assert (taint.key, taint.value, taint.effect) == (gpus.UNHEALTHY_TAINT, "Xid79", "NoSchedule")
    assert taint.time_added  # when it turned unhealthy
    # a taint changes one slice in place: the device set and the generation stay
    assert gpu_slice.pool.generation == 1
    assert node.writes("update") == 1


def test_a_gpu_that_vanished_bumps_the_generation(node: Node) -> None:
    node.reporter.sync()
    node.inventory = Inventory(
        gpus=node.inventory.gpus[:7], rdma=node.inventory.rdma, gpu_driver_version="535.161.08", simulated=True
    )
    node.reporter.sync(full=False)
    [gpu_slice] = node.slices()
    assert gpu_slice.pool.generation == 2
    assert [d.name for d in gpu_slice.devices] == [f"gpu-{m}" for m in range(7)]


def test_slices_are_owned_by_the_node_once_it_exists(node: Node) -> None:
    node.reporter.sync()
    assert node.slices()[0].meta.owner_references == ()
    created = node.client.resource(NODES).create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node.name}})
    node.reporter.sync(full=True)
    [owner] = node.slices()[0].meta.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "Node",
        node.name,
        created["metadata"]["uid"],
        True,
    )


def test_a_deleted_or_foreign_slice_is_corrected_on_a_full_pass(node: Node) -> None:
    node.reporter.sync()
    slices = node.client.resource(dra.RESOURCE_SLICES)
    slices.delete(node.slices()[0].name)
    stale = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"stale-{node.name}"},
        "spec": {"driver": gpus.DRIVER, "nodeName": node.name, "pool": {"name": "old-pool", "resourceSliceCount": 1}},
    }
    slices.create(stale)
    node.reporter.sync(full=True)
    [gpu_slice] = node.slices()
    assert gpu_slice.pool.name == node.name
    assert len(gpu_slice.devices) == 8
