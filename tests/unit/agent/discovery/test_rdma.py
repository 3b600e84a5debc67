"""RDMA discovery over fixture sysfs trees."""

from __future__ import annotations

import os
import shutil

import pytest

from agent.discovery.model import IBPort
from agent.discovery.pci import PCIBus
from agent.discovery.rdma import RDMASource, port_states
from apis.crds.device import DeviceTopology, VirtualFunction
from apis.errors import DiscoveryError
from tests.support.sysfs_tree import SysfsTree


def test_rdma_pfs_with_ports_vfs_and_topology(sysfs: SysfsTree) -> None:
    rdma = RDMASource(PCIBus(sysfs.root)).discover().rdma
    assert [(r.minor, r.ib_device, r.bus_id) for r in rdma] == [
        (0, "mlx5_0", "0000:1a:00.0"),
        (1, "mlx5_1", "0000:1a:00.1"),
    ]  # VFs (with IB devices of their own), the virtio NIC and the GPUs are not RDMA devices
    first, second = rdma
    assert first.ports == (IBPort(1, "ACTIVE"),) and first.ports_active
    assert second.ports == (IBPort(1, "DOWN"),) and not second.ports_active
    assert first.vfs == (VirtualFunction(0, "0000:1a:00.2"), VirtualFunction(1, "0000:1a:00.3"))
    assert second.vfs == ()
    assert first.topology == DeviceTopology(socket_id=0, node_id=0, pcie_id="pci0000:17", bus_id="0000:1a:00.0")
    assert (first.vendor_id, first.device_id) == (0x15B3, 0x101B)
    assert first.netdev is None  # no netlink reader given


def test_port_states_parse_every_state_and_survive_a_broken_file(sysfs: SysfsTree) -> None:
    ib = sysfs.pci_dir("0000:1a:00.0") / "infiniband" / "mlx5_0"
    sysfs.set_port_state(ib, 2, "INIT")
    (ib / "ports" / "3").mkdir()  # no state file
    assert port_states(sysfs.pci_dir("0000:1a:00.0"), "mlx5_0") == (
        IBPort(1, "ACTIVE"),
        IBPort(2, "INIT"),
        IBPort(3, "UNKNOWN"),
    )


def test_port_states_of_a_vanished_device_raise(sysfs: SysfsTree) -> None:
    shutil.rmtree(sysfs.pci_dir("0000:1a:00.1") / "infiniband")
    with pytest.raises(DiscoveryError, match="cannot list ports"):
        port_states(sysfs.pci_dir("0000:1a:00.1"), "mlx5_1")


@pytest.mark.parametrize(
    ("renamed_to", "warning"),
    [
        ("rocep26s0f1", "Skipping IB device not named like mlx5_<minor>"),  # udev's rename: no minor
        ("mlx4_0", "Skipping RDMA device whose minor is taken"),  # minor 0 is mlx5_0's
    ],
    ids=["no-minor", "minor-taken"],
)
def test_second_nic_is_skipped_when_its_ib_name_gives_no_usable_minor(
    sysfs: SysfsTree, caplog: pytest.LogCaptureFixture, renamed_to: str, warning: str
) -> None:
    ib = sysfs.pci_dir("0000:1a:00.1") / "infiniband"
    os.rename(ib / "mlx5_1", ib / renamed_to)
    rdma = RDMASource(PCIBus(sysfs.root)).discover().rdma
    assert [r.ib_device for r in rdma] == ["mlx5_0"]
    assert warning in caplog.text


def test_netdev_not_found_over_netlink_is_a_warning(sysfs: SysfsTree, caplog: pytest.LogCaptureFixture) -> None:
    from agent.discovery.netlink import LinkReader

    rdma = RDMASource(PCIBus(sysfs.root), LinkReader()).discover().rdma  # this machine has no enp26s0f0np0
    assert len(rdma) == 2 and rdma[0].netdev is None
    assert "NIC's netdev not found over netlink" in caplog.text
