"""The Device CR built from the fixture node: exactly as protocol.md says, and deterministic."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from agent.devices.cr import build_device
from agent.discovery.fake_nvml import FakeNVML
from agent.discovery.model import Inventory
from agent.discovery.settings import DiscoverySettings, DiscoveryStack, open_discovery
from agent.discovery.simulated import load_profile
from agent.health.clock import ManualClock
from agent.health.monitor import HealthMonitor
from agent.health.tracker import HealthTracker
from apis.crds.device import Device
from apis.extension import devicetypes, names
from tests.support.nvml import NODE
from tests.support.sysfs_tree import SysfsTree

NODE_UID = "6a1f0c52-9e5b-4f3e-8f7d-2c1b0a9d8e7f"

# uuid, minor, NUMA node (= socket), PCIe root, bus id: the fixture's GPUs as NVML and sysfs say
GPUS = [
    ("GPU-8b245aa0-1e88-5521-b0ca-1a911a51f2b9", 0, 0, "pci0000:17", "0000:18:00.0"),
    ("GPU-7fc6b11c-d14f-544b-929d-f26d713595f5", 1, 0, "pci0000:17", "0000:19:00.0"),
    ("GPU-e55b8d18-66f0-5be7-8e79-60b6bb071be5", 2, 0, "pci0000:3a", "0000:3b:00.0"),
    ("GPU-44910a43-bc2c-5cdd-9c7a-763042003bac", 3, 0, "pci0000:3a", "0000:3c:00.0"),
    ("GPU-bd06c29e-1a61-59dd-9a1f-3498e6547426", 4, 1, "pci0000:85", "0000:86:00.0"),
    ("GPU-72a7686a-7d0a-52a8-badc-6c86455baf47", 5, 1, "pci0000:85", "0000:87:00.0"),
    ("GPU-8091a219-18c2-5a14-830d-93adc6316467", 6, 1, "pci0000:ae", "0000:af:00.0"),
    ("GPU-fcde9f75-18bf-5575-a72d-9b3faf25d652", 7, 1, "pci0000:ae", "0000:b0:00.0"),
]

EXPECTED: dict[str, Any] = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "Device",
    "metadata": {
        "name": "gpu-node-1",
        "labels": {
            "node.koordinator.sh/gpu-vendor": "nvidia",
            "node.koordinator.sh/gpu-model": "A100-SXM4-80GB",
            "node.koordinator.sh/gpu-driver-version": "535.161.08",
        },
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": "gpu-node-1",
                "uid": NODE_UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    },
    "spec": {
        "devices": [
            *(
                {
                    "type": "gpu",
                    "id": uuid,
                    "minor": minor,
                    "health": True,
                    "resources": {
                        "koordinator.sh/gpu-core": "100",
                        "koordinator.sh/gpu-memory": "80Gi",
                        "koordinator.sh/gpu-memory-ratio": "100",
                    },
                    "topology": {"socketID": numa, "nodeID": numa, "pcieID": root, "busID": bus_id},
                }
                for uuid, minor, numa, root, bus_id in GPUS
            ),
            {
                "type": "rdma",
                "id": "0000:1a:00.0",
                "minor": 0,
                "health": True,
                "resources": {"koordinator.sh/rdma": "100"},
                "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:17", "busID": "0000:1a:00.0"},
                "vfGroups": [{"vfs": [{"minor": 0, "busID": "0000:1a:00.2"}, {"minor": 1, "busID": "0000:1a:00.3"}]}],
            },
            {
                "type": "rdma",
                "id": "0000:1a:00.1",
                "minor": 1,
                "health": False,
                "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:17", "busID": "0000:1a:00.1"},
                "conditions": [
                    {
                        "type": "Healthy",
                        "status": "False",
                        "lastTransitionTime": "2024-01-01T00:00:00Z",
                        "reason": "PortNotActive",
                        "message": "mlx5_1: port 1 is DOWN",
                    }
                ],
            },
        ]
    },
}


class Node:
    """The fixture node run through discovery and one health probe, as the agent does."""

    def __init__(self, sysfs: SysfsTree, fake_nvml: FakeNVML) -> None:
        self.fake = fake_nvml
        self.stack: DiscoveryStack = open_discovery(
            DiscoverySettings(node_name=NODE, sysfs_root=sysfs.root, netlink=False), nvml_library=fake_nvml
        )
        self.clock = ManualClock()
        self.tracker = HealthTracker(self.clock, quiet_period_s=60)
        self.inventory: Inventory = self.stack.discovery.run()
        self.monitor = HealthMonitor.for_inventory(
            self.inventory, self.tracker, nvml=self.stack.nvml, bus=self.stack.bus
        )
        self.monitor.probe_once()

    def device(self) -> Device:
        self.inventory = self.stack.discovery.run()
        return build_device(self.inventory, self.tracker.snapshot(), node_name=NODE, node_uid=NODE_UID)


@pytest.fixture
def node(sysfs: SysfsTree, fake_nvml: FakeNVML) -> Iterator[Node]:
    node = Node(sysfs, fake_nvml)
    yield node
    node.monitor.stop()
    node.stack.close()


def test_fixture_node_gives_exactly_the_expected_device_cr(node: Node) -> None:
    assert node.device().to_dict() == EXPECTED


def test_the_cr_is_valid_for_the_protocol_parser(node: Node) -> None:
    device = node.device()
    assert Device.from_dict(device.to_dict()) == device


def test_an_unchanged_node_gives_an_identical_object(node: Node) -> None:
    first = node.device()
    node.clock.advance(3600)
    node.monitor.probe_once()
    assert node.device() == first
    assert node.device().to_dict() == first.to_dict()


def test_a_critical_xid_takes_the_gpu_out_and_recovery_puts_it_back(node: Node) -> None:
    gpu = node.inventory.gpus[2]
    node.fake.inject_xid(gpu.uuid, 94)
    assert node.monitor.watcher is not None and node.monitor.watcher.poll(1000)
    entry = node.device().to_dict()["spec"]["devices"][2]
    assert entry == {
        "type": "gpu",
        "id": gpu.uuid,
        "minor": 2,
        "health": False,
        "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"},
        "conditions": [
            {
                "type": "Healthy",
                "status": "False",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
                "reason": "Xid94",
                "message": "XID 94: Contained ECC error",
            }
        ],
    }
    node.clock.advance(60)
    node.monitor.probe_once()
    entry = node.device().to_dict()["spec"]["devices"][2]
    assert entry["health"] is True and entry["resources"]["koordinator.sh/gpu-core"] == "100"
    assert entry["conditions"] == [
        {
            "type": "Healthy",
            "status": "True",
            "lastTransitionTime": "2024-01-01T00:01:00Z",
            "reason": "Recovered",
            "message": "no device error for 60s",
        }
    ]


def test_without_the_node_uid_there_is_no_owner_reference(node: Node) -> None:
    device = build_device(node.inventory, {}, node_name=NODE)
    assert device.meta.owner_references == ()


def test_gpus_of_different_models_get_no_model_label(node: Node) -> None:
    gpus = (node.inventory.gpus[0], dataclasses.replace(node.inventory.gpus[1], name="NVIDIA H100 80GB HBM3"))
    labels = build_device(dataclasses.replace(node.inventory, gpus=gpus), {}, node_name=NODE).meta.labels
    assert "node.koordinator.sh/gpu-model" not in labels
    assert labels["node.koordinator.sh/gpu-vendor"] == "nvidia"


def test_simulated_devices_are_labelled(node: Node) -> None:
    labels = build_device(dataclasses.replace(node.inventory, simulated=True), {}, node_name=NODE).meta.labels
    assert labels["tessera.dev/simulated"] == "true"


def test_a_node_with_an_isolation_layer_is_labelled_with_it(node: Node) -> None:
    inventory = dataclasses.replace(node.inventory, isolation_provider="HAMi-core")
    assert build_device(inventory, {}, node_name=NODE).meta.labels["koordinator.sh/gpu-isolation-provider"] == (
        "HAMi-core"
    )
    assert "koordinator.sh/gpu-isolation-provider" not in build_device(node.inventory, {}, node_name=NODE).meta.labels


def test_a_node_without_devices_has_an_empty_cr() -> None:
    assert build_device(Inventory(), {}, node_name="cpu-node").to_dict() == {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": "cpu-node"},
        "spec": {"devices": []},
    }


def test_nvlink_peers_are_published_as_the_annotation() -> None:
    device = build_device(load_profile("a100-pcie-4x").inventory(NODE), {}, node_name=NODE)
    assert device.nvlink == {0: {1}, 1: {0}, 2: {3}, 3: {2}}
    annotation = device.to_dict()["metadata"]["annotations"][names.ANNOTATION_GPU_NVLINK_PEERS]
    assert annotation == '{"0":[1],"1":[0],"2":[3],"3":[2]}'
    assert Device.from_dict(device.to_dict()) == device


def test_nvlink_peers_are_made_symmetric_and_kept_to_reported_gpus(node: Node) -> None:
    gpus = list(node.inventory.gpus[:3])
    gpus[0] = dataclasses.replace(gpus[0], nvlink_peers=(1, 9))  # 9: not reported; 1 does not list 0
    device = build_device(dataclasses.replace(node.inventory, gpus=tuple(gpus)), {}, node_name=NODE)
    assert device.nvlink == {0: {1}, 1: {0}}
    assert Device.from_dict(device.to_dict()) == device


def test_the_agent_writes_exactly_the_types_the_device_type_table_says_it_discovers() -> None:
    device = build_device(load_profile("a100-8x").inventory(NODE), {}, node_name=NODE)
    assert {d.type for d in device.devices} == {
        row.type for row in devicetypes.TABLE if row.discovery is not devicetypes.Discovery.NONE
    }
    for d in device.devices:
        assert set(d.resources) == set(devicetypes.spec(d.type).capacity), d
