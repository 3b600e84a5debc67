"""The health loop's thread: a fault reaches subscribers (how soon: `tessera bench agent`)."""

from __future__ import annotations

import threading

from agent.discovery.fake_nvml import FakeNVML
from agent.discovery.nvml import NVMLSource
from agent.discovery.nvmllib import NVML
from agent.discovery.pci import PCIBus
from agent.discovery.rdma import RDMASource
from agent.discovery.simulated import load_profile
from agent.health.clock import ManualClock, SystemClock
from agent.health.monitor import HealthMonitor
from agent.health.tracker import Health, HealthTracker
from tests.support.sysfs_tree import SysfsTree

#: Bounds a test that would otherwise hang; no test asserts how soon a change came.
HANG_GUARD_S = 30.0


def wait_for_change(tracker: HealthTracker) -> threading.Event:
    changed = threading.Event()

    def on_change(_: str, health: Health) -> None:
        if not health.healthy:
            changed.set()

    tracker.subscribe(on_change)
    return changed


def test_an_xid_reaches_subscribers(sysfs: SysfsTree, fake_nvml: FakeNVML) -> None:
    nvml = NVML(fake_nvml)
    nvml.init()
    bus = PCIBus(sysfs.root)
    inventory = NVMLSource(nvml, bus).discover()
    tracker = HealthTracker(SystemClock())
    monitor = HealthMonitor.for_inventory(inventory, tracker, nvml=nvml, bus=bus)
    changed = wait_for_change(tracker)
    monitor.start()
    try:
        fake_nvml.inject_xid(inventory.gpus[3].uuid, 79)
        assert changed.wait(HANG_GUARD_S), "no health change"
        assert tracker.health(inventory.gpus[3].uuid).reason == "Xid79"
    finally:
        monitor.stop()
    assert fake_nvml.open_event_sets == 0


def test_a_port_going_down_reaches_subscribers(sysfs: SysfsTree) -> None:
    bus = PCIBus(sysfs.root)
    inventory = RDMASource(bus).discover()
    tracker = HealthTracker(SystemClock())
    monitor = HealthMonitor.for_inventory(inventory, tracker, nvml=None, bus=bus)
    monitor.start()  # the first probe runs before start returns
    assert not tracker.health("0000:1a:00.1").healthy
    changed = wait_for_change(tracker)
    try:
        sysfs.set_port_state(sysfs.pci_dir("0000:1a:00.0") / "infiniband" / "mlx5_0", 1, "DOWN")
        assert changed.wait(HANG_GUARD_S), "no health change"
    finally:
        monitor.stop()


def test_simulated_nics_are_not_probed_in_sysfs() -> None:
    profile = load_profile("a100-8x")
    nvml = NVML(profile.fake_nvml("n"))
    nvml.init()
    tracker = HealthTracker(ManualClock())
    monitor = HealthMonitor.for_inventory(profile.inventory("n"), tracker, nvml=nvml, bus=PCIBus())
    monitor.probe_once()
    monitor.stop()
    assert tracker.snapshot() == {}  # nothing unhealthy: no sysfs for simulated NICs
