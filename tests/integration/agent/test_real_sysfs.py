"""Discovery on this machine's real sysfs, NVML and netlink: enumerated without error.

The development machines have a handful of virtio PCI functions, no GPU, no NVIDIA driver and no
/sys/class/infiniband; on a GPU machine the same tests see its GPUs.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest

from agent.devices.cr import build_device
from agent.discovery.pci import PCIBus, PCISource
from agent.discovery.rdma import RDMASource
from agent.discovery.settings import DiscoverySettings, open_discovery
from agent.health.clock import SystemClock
from agent.health.monitor import HealthMonitor
from agent.health.tracker import HealthTracker
from agent.metrics.containers import ContainerResolver
from apis.crds.device import Device

pytestmark = pytest.mark.integration

SYS = Path("/sys")


@pytest.fixture(autouse=True)
def needs_sysfs() -> None:
    if not (SYS / "bus" / "pci" / "devices").is_dir():
        pytest.skip("no /sys/bus/pci on this machine")


def test_every_pci_function_is_enumerated(caplog: pytest.LogCaptureFixture) -> None:
    functions = PCISource(PCIBus(SYS)).discover().pci
    assert [f.bus_id for f in functions] == sorted(os.listdir(SYS / "bus" / "pci" / "devices"))
    for fn in functions:
        assert fn.class_code == int((SYS / "bus" / "pci" / "devices" / fn.bus_id / "class").read_text(), 16)
        assert fn.pcie_root.startswith("pci")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_rdma_discovery_finds_exactly_the_infiniband_devices() -> None:
    rdma = RDMASource(PCIBus(SYS)).discover().rdma
    infiniband = SYS / "class" / "infiniband"
    expected = sorted(os.listdir(infiniband)) if infiniband.is_dir() else []
    assert {r.ib_device for r in rdma} <= set(expected)
    if not expected:
        assert rdma == ()


def test_the_whole_pipeline_on_this_machine(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agent")
    stack = open_discovery(DiscoverySettings(node_name="this-node"))
    try:
        inventory = stack.discovery.run()
        tracker = HealthTracker(SystemClock())
        monitor = HealthMonitor.for_inventory(inventory, tracker, nvml=stack.nvml, bus=stack.bus)
        monitor.probe_once()
        monitor.stop()
        device = build_device(inventory, tracker.snapshot(), node_name="this-node", node_uid="uid-1")
        assert Device.from_dict(device.to_dict()) == device
        if stack.nvml is None:  # no driver here: one clear line, no GPUs
            assert inventory.gpus == ()
            assert "No NVIDIA driver: NVML unavailable, reporting no GPUs" in caplog.text
    finally:
        stack.close()


def test_real_proc_is_read_without_error() -> None:
    resolver = ContainerResolver()
    ref = resolver.container_of(os.getpid())  # a container id where the tests run in one
    assert ref is None or re.fullmatch("[0-9a-f]{64}", ref.container_id)
    assert resolver.container_of(2**22 + 1) is None  # above pid_max: no such process
