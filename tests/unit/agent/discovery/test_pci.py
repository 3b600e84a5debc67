"""Generic PCI enumeration over fixture sysfs trees, including broken ones."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from agent.discovery.pci import PCIBus, PCISource
from apis.crds.device import DeviceTopology, VirtualFunction
from apis.errors import DiscoveryError
from tests.support.sysfs_tree import SysfsTree


def test_functions_carry_class_ids_numa_root_and_driver(sysfs: SysfsTree) -> None:
    bus = PCIBus(sysfs.root)
    gpu = bus.function("0000:86:00.0")
    assert gpu is not None
    assert (gpu.class_code, gpu.vendor_id, gpu.device_id) == (0x030200, 0x10DE, 0x20B2)
    assert (gpu.numa_node, gpu.pcie_root, gpu.driver) == (1, "pci0000:85", "nvidia")
    assert not gpu.is_vf and gpu.vfs == ()


def test_sriov_pf_lists_its_vfs_and_vfs_name_their_pf(sysfs: SysfsTree) -> None:
    bus = PCIBus(sysfs.root)
    pf = bus.function("0000:1a:00.0")
    vf = bus.function("0000:1a:00.3")
    assert pf is not None and vf is not None
    assert pf.vfs == (VirtualFunction(0, "0000:1a:00.2"), VirtualFunction(1, "0000:1a:00.3"))
    assert vf.physfn == "0000:1a:00.0" and vf.is_vf


def test_every_function_is_listed_once_in_bus_order(sysfs: SysfsTree) -> None:
    inventory = PCISource(PCIBus(sysfs.root)).discover()
    ids = [f.bus_id for f in inventory.pci]
    assert ids == sorted(ids)
    assert len(ids) == 8 + 2 + 2 + 2  # GPUs, NIC PFs, VFs, host bridge + virtio NIC
    assert inventory.gpus == () and inventory.rdma == ()


def test_topology_maps_numa_to_its_socket_and_no_affinity_to_node_0(sysfs: SysfsTree) -> None:
    bus = PCIBus(sysfs.root)
    gpu, virtio = bus.function("0000:af:00.0"), bus.function("0000:00:03.0")
    assert gpu is not None and virtio is not None
    assert bus.topology(gpu) == DeviceTopology(socket_id=1, node_id=1, pcie_id="pci0000:ae", bus_id="0000:af:00.0")
    # numa_node -1 means "no affinity": the protocol reports node 0; node 0's socket is 0
    assert bus.topology(virtio) == DeviceTopology(socket_id=0, node_id=0, pcie_id="pci0000:00", bus_id="0000:00:03.0")


def test_socket_is_unknown_without_node_topology(sysfs: SysfsTree) -> None:
    assert PCIBus(sysfs.root).socket_of(7) == -1


def test_garbage_class_file_skips_the_function_with_a_warning(
    sysfs: SysfsTree, caplog: pytest.LogCaptureFixture
) -> None:
    (sysfs.pci_dir("0000:19:00.0") / "class").write_text("not-hex\n")
    with caplog.at_level(logging.WARNING):
        ids = [f.bus_id for f in PCIBus(sysfs.root).functions()]
    assert "0000:19:00.0" not in ids and "0000:18:00.0" in ids
    assert any(r.getMessage() == "Skipping PCI function with unreadable ids" for r in caplog.records)
    assert getattr(caplog.records[-1], "bus_id", None) == "0000:19:00.0"


def test_garbage_numa_node_means_no_affinity(sysfs: SysfsTree, caplog: pytest.LogCaptureFixture) -> None:
    (sysfs.pci_dir("0000:19:00.0") / "numa_node").write_text("?\n")
    fn = PCIBus(sysfs.root).function("0000:19:00.0")
    assert fn is not None and fn.numa_node == -1
    assert "Unreadable numa_node; assuming none" in caplog.text


def test_function_vanishing_mid_scan_is_skipped(sysfs: SysfsTree, caplog: pytest.LogCaptureFixture) -> None:
    real = sysfs.pci_dir("0000:3b:00.0")
    for name in os.listdir(real):
        if (real / name).is_file():
            (real / name).unlink()
    ids = [f.bus_id for f in PCIBus(sysfs.root).functions()]
    assert "0000:3b:00.0" not in ids
    assert "PCI function vanished while reading it" in caplog.text


def test_missing_pci_bus_is_a_discovery_error(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match="cannot list PCI devices"):
        PCIBus(tmp_path).functions()


def test_driver_addresses(sysfs: SysfsTree) -> None:
    bus = PCIBus(sysfs.root)
    assert len(bus.driver_addresses("nvidia")) == 8
    assert bus.driver_addresses("amdgpu") == []
