"""NodeDevices: the Device CR follows the health tracker and discovery passes; subscribers hear of both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from agent.devices.node import NodeDevices
from agent.discovery.fake_nvml import FakeNVML
from agent.discovery.settings import DiscoverySettings, open_discovery
from agent.settings import HealthSettings, MetricsSettings
from apis.crds.device import DeviceType
from tests.support.nvml import NODE
from tests.support.sysfs_tree import SysfsTree


@pytest.fixture
def devices(sysfs: SysfsTree, fake_nvml: FakeNVML) -> Iterator[NodeDevices]:
    stack = open_discovery(
        DiscoverySettings(node_name=NODE, sysfs_root=sysfs.root, netlink=False), nvml_library=fake_nvml
    )
    devices = NodeDevices(
        stack,
        node_name=NODE,
        registry=CollectorRegistry(),
        health=HealthSettings(),
        metrics=MetricsSettings(),
        discovery_interval_s=3600,
    )
    yield devices
    devices.stop()
    assert fake_nvml.open_event_sets == 0  # every monitor it built was closed


def test_the_cr_is_built_from_inventory_and_health(devices: NodeDevices) -> None:
    changes: list[int] = []
    devices.on_change(lambda: changes.append(1))
    cr = devices.build("uid-1")
    assert (len(cr.of_type(DeviceType.GPU)), len(cr.of_type(DeviceType.RDMA))) == (8, 2)
    assert [o.uid for o in cr.meta.owner_references] == ["uid-1"]
    gpu = devices.inventory.gpus[4]
    devices.tracker.fault(gpu.uuid, reason="Xid48", message="double-bit ECC")
    assert changes == [1]
    assert not devices.build("uid-1").of_type(DeviceType.GPU)[4].health


def test_a_discovery_pass_that_finds_a_change_rearms_health_and_notifies(
    devices: NodeDevices, sysfs: SysfsTree
) -> None:
    changes: list[int] = []
    devices.on_change(lambda: changes.append(1))
    devices.refresh()
    assert changes == []  # nothing changed: nobody is woken
    before = devices.inventory
    sysfs.set_port_state(sysfs.pci_dir("0000:1a:00.1") / "infiniband" / "mlx5_1", 1, "ACTIVE")
    devices.refresh()
    assert devices.inventory != before and changes
    assert [r.ports_active for r in devices.inventory.rdma] == [True, True]
