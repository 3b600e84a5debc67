"""RDMA health from sysfs port states: a NIC is healthy while every port is ACTIVE.

Read once a second by the health loop (a few small sysfs files per NIC). A port in any other
state (`DOWN`, `INIT`, `POLLING`, ...) is a `PortNotActive` problem naming the ports; a NIC whose
ports can no longer be listed (the device went away) is `DeviceVanished`.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.discovery.model import RDMADevice
from agent.discovery.pci import PCIBus
from agent.discovery.rdma import port_states
from agent.health.tracker import HealthTracker
from apis.errors import DiscoveryError

__all__ = ["REASON_DEVICE_VANISHED", "REASON_PORT_NOT_ACTIVE", "RDMAPortProbe"]

REASON_PORT_NOT_ACTIVE = "PortNotActive"
REASON_DEVICE_VANISHED = "DeviceVanished"
_SOURCE = "rdma-ports"


class RDMAPortProbe:
    def __init__(self, bus: PCIBus, devices: Sequence[RDMADevice], tracker: HealthTracker) -> None:
        self._bus = bus
        self._devices = tuple(devices)
        self._tracker = tracker

    def probe(self) -> None:
        for device in self._devices:
            try:
                ports = port_states(self._bus.device_dir(device.bus_id), device.ib_device)
            except DiscoveryError:
                self._tracker.problem(
                    device.bus_id,
                    _SOURCE,
                    reason=REASON_DEVICE_VANISHED,
                    message=f"{device.ib_device}: ports can no longer be read from sysfs",
                )
                continue
            down = [p for p in ports if not p.active]
            if down or not ports:
                states = ", ".join(f"port {p.number} is {p.state}" for p in down) or "no ports"
                self._tracker.problem(
                    device.bus_id, _SOURCE, reason=REASON_PORT_NOT_ACTIVE, message=f"{device.ib_device}: {states}"
                )
            else:
                self._tracker.clear(device.bus_id, _SOURCE)
