"""RDMA health from sysfs port states of the fixture tree."""

from __future__ import annotations

import shutil

from agent.discovery.pci import PCIBus
from agent.discovery.rdma import RDMASource
from agent.health.clock import ManualClock
from agent.health.rdma_ports import RDMAPortProbe
from agent.health.tracker import HealthTracker
from tests.support.sysfs_tree import SysfsTree
from tests.unit.agent.health.recording import QUIET_S


def probe_for(sysfs: SysfsTree, tracker: HealthTracker) -> RDMAPortProbe:
    bus = PCIBus(sysfs.root)
    return RDMAPortProbe(bus, RDMASource(bus).discover().rdma, tracker)


def test_a_down_port_makes_its_nic_unhealthy_and_active_ones_stay_healthy(
    sysfs: SysfsTree, tracker: HealthTracker
) -> None:
    probe_for(sysfs, tracker).probe()
    down = tracker.health("0000:1a:00.1")
    assert (down.healthy, down.reason, down.message) == (False, "PortNotActive", "mlx5_1: port 1 is DOWN")
    assert tracker.health("0000:1a:00.0").healthy


def test_a_port_coming_up_heals_after_the_quiet_period(
    sysfs: SysfsTree, tracker: HealthTracker, clock: ManualClock
) -> None:
    probe = probe_for(sysfs, tracker)
    probe.probe()
    sysfs.set_port_state(sysfs.pci_dir("0000:1a:00.1") / "infiniband" / "mlx5_1", 1, "ACTIVE")
    probe.probe()
    assert not tracker.health("0000:1a:00.1").healthy
    clock.advance(QUIET_S)
    probe.probe()
    tracker.tick()
    assert tracker.health("0000:1a:00.1").healthy


def test_a_port_going_down_is_seen_on_the_next_probe(sysfs: SysfsTree, tracker: HealthTracker) -> None:
    probe = probe_for(sysfs, tracker)
    probe.probe()
    sysfs.set_port_state(sysfs.pci_dir("0000:1a:00.0") / "infiniband" / "mlx5_0", 1, "INIT")
    probe.probe()
    assert tracker.health("0000:1a:00.0").message == "mlx5_0: port 1 is INIT"


def test_a_nic_whose_ports_vanish_is_unhealthy(sysfs: SysfsTree, tracker: HealthTracker) -> None:
    probe = probe_for(sysfs, tracker)
    shutil.rmtree(sysfs.pci_dir("0000:1a:00.0") / "infiniband")
    probe.probe()
    assert tracker.health("0000:1a:00.0").reason == "DeviceVanished"
