"""Netlink in a network namespace: a veth pair's link state changes are seen.

Needs root and iproute2 (`make test` installs it as root); skips with the reason otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from agent.discovery.netlink import LinkReader
from agent.discovery.pci import PCIBus
from agent.discovery.rdma import RDMASource
from tests.support.sysfs_tree import SysfsTree

pytestmark = [pytest.mark.integration, pytest.mark.root]

# The fixture NIC's netdev name, so the RDMA source finds it over netlink in the namespace.
IFACE, PEER = "enp26s0f0np0", "veth-peer"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def netns() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("needs root to create a network namespace")
    if shutil.which("ip") is None:
        pytest.skip("needs iproute2 (`ip`)")
    name = f"tessera-test-{uuid.uuid4().hex[:8]}"
    ip("netns", "add", name)
    try:
        ip("-n", name, "link", "add", IFACE, "type", "veth", "peer", "name", PEER)
        ip("-n", name, "link", "set", IFACE, "address", "02:00:00:00:1a:00")
        yield name
    finally:
        ip("netns", "delete", name)


def test_link_state_changes_are_seen(netns: str) -> None:
    reader = LinkReader(netns)
    down = reader.read(IFACE)
    assert down is not None and down.name == IFACE and down.mac == "02:00:00:00:1a:00"
    assert down.oper_state == "DOWN" and not down.up

    ip("-n", netns, "link", "set", IFACE, "up")
    ip("-n", netns, "link", "set", PEER, "up")
    up = reader.read(IFACE)
    assert up is not None and up.oper_state == "UP" and up.up
    assert up.speed_mbps == 10000  # veth reports 10 Gb/s

    ip("-n", netns, "link", "set", PEER, "down")  # the carrier goes with the peer
    lost = reader.read(IFACE)
    assert lost is not None and lost.oper_state == "LOWERLAYERDOWN" and not lost.up

    ip("-n", netns, "link", "set", PEER, "up")
    back = reader.read(IFACE)
    assert back is not None and back.up


def test_an_interface_that_does_not_exist_reads_as_none(netns: str) -> None:
    assert LinkReader(netns).read("nope0") is None


def test_rdma_discovery_describes_the_nic_netdev_over_netlink(netns: str, sysfs: SysfsTree) -> None:
    ip("-n", netns, "link", "set", IFACE, "up")
    ip("-n", netns, "link", "set", PEER, "up")
    rdma = RDMASource(PCIBus(sysfs.root), LinkReader(netns)).discover().rdma
    assert rdma[0].netdev is not None
    assert (rdma[0].netdev.name, rdma[0].netdev.mac, rdma[0].netdev.up) == (IFACE, "02:00:00:00:1a:00", True)
    assert rdma[1].netdev is None  # its netdev (enp26s0f1np0) is not in the namespace
