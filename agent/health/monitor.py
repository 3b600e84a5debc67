"""The health loop: one thread that waits for NVML events and probes devices every second.

Between probes the thread blocks in NVML's event wait (or simply sleeps without NVML), so an XID
is handled the moment it arrives; every `interval_s` it runs the probes (GPU liveness, RDMA port
states) and lets the tracker re-check quiet periods. Detection therefore takes at most about one
interval (1 s by default), within the 2 s the Device CR promises.

`HealthMonitor.for_inventory` builds the watcher and probes an inventory needs; the agent then
subscribes to the tracker and calls `start` / `stop`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Protocol

from agent.discovery.model import Inventory
from agent.discovery.nvmllib import NVML, HandleCache, NVMLCallError
from agent.discovery.pci import PCIBus
from agent.health.nvml_events import NVMLWatcher
from agent.health.rdma_ports import RDMAPortProbe
from agent.health.tracker import HealthTracker
from agent.periodic import Periodic

__all__ = ["HealthMonitor", "Probe"]

log = logging.getLogger(__name__)

#: Longest single NVML event wait, so that `stop` returns quickly.
_STOP_LATENCY_S = 0.25


class Probe(Protocol):
    def probe(self) -> None:
        """Look at the devices once and report to the tracker. Must not block for long."""
        ...


class HealthMonitor:
    def __init__(
        self,
        tracker: HealthTracker,
        *,
        watcher: NVMLWatcher | None = None,
        probes: Sequence[Probe] = (),
        interval_s: float = 1.0,
    ) -> None:
        self.tracker = tracker
        self.watcher = watcher
        self._probes = (*([watcher] if watcher else []), *probes)
        self.interval_s = interval_s
        self._loop = Periodic("health", self._step, 0)

    @classmethod
    def for_inventory(
        cls,
        inventory: Inventory,
        tracker: HealthTracker,
        *,
        nvml: NVML | None,
        bus: PCIBus,
        interval_s: float = 1.0,
    ) -> HealthMonitor:
        """Watch the inventory's GPUs through `nvml` (if any) and its RDMA ports through sysfs
        (unless simulated: simulated NICs have no sysfs). Raises NVMLCallError when NVML cannot
        create an event set."""
        watcher = None
        if nvml is not None and inventory.gpus:
            watcher = NVMLWatcher(nvml, inventory.gpus, tracker, HandleCache(nvml))
            watcher.open()
        probes: list[Probe] = []
        if inventory.rdma and not inventory.simulated:
            probes.append(RDMAPortProbe(bus, inventory.rdma, tracker))
        return cls(tracker, watcher=watcher, probes=probes, interval_s=interval_s)

    def probe_once(self) -> None:
        """Run every probe, then re-check quiet periods."""
        for probe in self._probes:
            probe.probe()
        self.tracker.tick()

    def start(self) -> None:
        self.probe_once()  # the first verdict before anyone reads the tracker
        self._loop.start()

    def stop(self) -> None:
        """Stop the loop and free the NVML event set. Idempotent."""
        self._loop.stop()
        if self.watcher is not None:
            self.watcher.close()

    def _step(self) -> None:
        deadline = time.monotonic() + self.interval_s
        while not self._loop.stopping and (left := deadline - time.monotonic()) > 0:
            if self.watcher is None:
                self._loop.wait(left)
                continue
            try:
                self.watcher.poll(max(1, int(min(left, _STOP_LATENCY_S) * 1000)))
            except NVMLCallError as e:
                log.warning("Waiting for NVML events failed", extra={"error": str(e)})
                self._loop.wait(left)
        if not self._loop.stopping:
            self.probe_once()
