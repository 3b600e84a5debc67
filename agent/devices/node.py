"""The node's devices as the agent process knows them: inventory, health and GPU metrics, kept current.

Discovery, the health monitor and the GPU metrics collector each work on one inventory; this
module runs them together for the agent process (`agent/app.py`) and keeps them in step: a
discovery pass every `discovery_interval_s` that finds a different set of devices rebuilds the
health monitor and hands the metrics collector the new GPUs. Subscribers (`on_change`) hear about
every change that alters the Device CR — a device's health, or the inventory — and `build(uid)`
gives the CR for the current state, `pools()` the DRA pools (ResourceSlices) for the same state.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from agent.devices.cr import build_device
from agent.devices.slices import Pool, build_pools
from agent.discovery.model import Inventory
from agent.discovery.nvmllib import NVMLCallError
from agent.discovery.settings import DiscoveryStack
from agent.health.clock import SystemClock
from agent.health.monitor import HealthMonitor
from agent.health.tracker import HealthTracker
from agent.metrics.containers import ContainerResolver
from agent.metrics.gpu import GPUMetrics, PodByUID
from agent.periodic import Periodic
from agent.settings import HealthSettings, MetricsSettings
from apis.crds.device import Device
from apis.extension.partitions import PartitionPolicy

__all__ = ["NodeDevices"]

log = logging.getLogger(__name__)


class NodeDevices:
    """Owns the discovery stack (closed by `stop`), the health tracker and monitor, the GPU metrics."""

    def __init__(
        self,
        stack: DiscoveryStack,
        *,
        node_name: str,
        registry: CollectorRegistry,
        health: HealthSettings,
        metrics: MetricsSettings,
        discovery_interval_s: float,
        pods: PodByUID | None = None,
        partition_policy: PartitionPolicy = PartitionPolicy.PREFER,
    ) -> None:
        self.node_name = node_name
        self._partition_policy = partition_policy
        self.stack = stack
        self.tracker = HealthTracker(SystemClock(), quiet_period_s=health.quiet_period_s)
        self._health = health
        self._subscribers: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._inventory = stack.discovery.run()
        self.metrics = (
            GPUMetrics(
                registry,
                node_name=node_name,
                nvml=stack.nvml,
                gpus=self._inventory.gpus,
                tracker=self.tracker,
                containers=ContainerResolver(metrics.proc_root),
                interval_s=metrics.interval_s,
                pods=pods,
            )
            if stack.nvml is not None
            else None
        )
        self._monitor = self._new_monitor(self._inventory)
        self._loop = Periodic("discovery", self.refresh, discovery_interval_s)
        self.tracker.subscribe(lambda device_id, health: self._notify())

    @property
    def inventory(self) -> Inventory:
        return self._inventory

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (quick, any thread) whenever the Device CR would change."""
        self._subscribers.append(callback)

    def build(self, node_uid: str) -> Device:
        """The Device CR for the current inventory and health."""
        return build_device(
            self._inventory,
            self.tracker.snapshot(),
            node_name=self.node_name,
            node_uid=node_uid,
            partition_policy=self._partition_policy,
        )

    def pools(self) -> tuple[Pool, Pool]:
        """The node's DRA pools (GPUs, RDMA NICs) for the current inventory and health: the
        same inputs as `build`, so the slices match the Device CR device for device."""
        return build_pools(self._inventory, self.tracker.snapshot(), node_name=self.node_name)

    def start(self) -> None:
        """Start health monitoring, metrics collection and the discovery loop."""
        self._monitor.start()
        if self.metrics is not None:
            self.metrics.start()
        self._loop.start()

    def stop(self) -> None:
        """Stop every loop and close discovery (NVML included). Idempotent."""
        self._loop.stop()
        if self.metrics is not None:
            self.metrics.stop()
        with self._lock:
            self._monitor.stop()
        self.stack.close()

    def refresh(self) -> None:
        """One discovery pass; a changed inventory re-arms health and metrics and notifies."""
        inventory = self.stack.discovery.run()
        if inventory == self._inventory:
            return
        with self._lock:
            self._monitor.stop()
            self._inventory = inventory
            self._monitor = self._new_monitor(inventory)
            self._monitor.start()
        if self.metrics is not None:
            self.metrics.set_gpus(inventory.gpus)
        self._notify()

    def _new_monitor(self, inventory: Inventory) -> HealthMonitor:
        nvml, bus, interval_s = self.stack.nvml, self.stack.bus, self._health.interval_s
        try:
            monitor = HealthMonitor.for_inventory(inventory, self.tracker, nvml=nvml, bus=bus, interval_s=interval_s)
        except NVMLCallError as e:
            log.error("NVML cannot report XID events: GPU health is not monitored", extra={"error": str(e)})
            monitor = HealthMonitor.for_inventory(inventory, self.tracker, nvml=None, bus=bus, interval_s=interval_s)
        if monitor.watcher is not None and self.metrics is not None:
            monitor.watcher.on_xid(self.metrics.count_xid)
        return monitor

    def _notify(self) -> None:
        for callback in list(self._subscribers):
            callback()
