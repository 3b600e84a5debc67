"""Runs the configured discovery sources and joins what they found into one inventory.

A node's devices should not blink in and out of its Device CR: a source that fails this pass
(NVML hiccup, sysfs race) must not make the scheduler think its devices are gone. So `Discovery`
remembers every GPU and RDMA device seen since start-up and keeps reporting one that is no longer
found (its health monitor marks it unhealthy); a device whose minor is taken by a present one is
dropped. Restarting the agent forgets devices that really left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from agent.discovery.model import GPU, Inventory, RDMADevice
from agent.discovery.source import DeviceSource
from apis.errors import DiscoveryError
from kube.logs import V

__all__ = ["Discovery"]

log = logging.getLogger(__name__)

_D = TypeVar("_D", GPU, RDMADevice)


class Discovery:
    """Not thread-safe: call `run` from one loop."""

    def __init__(self, sources: Sequence[DeviceSource]) -> None:
        self.sources = tuple(sources)
        self._gpus: dict[str, GPU] = {}
        self._rdma: dict[str, RDMADevice] = {}
        self._missing: set[str] = set()
        self._driver_version = ""
        self._simulated = False
        self._last: Inventory | None = None

    def run(self) -> Inventory:
        """One pass over every source. Never raises for a failing source: it is logged and its
        devices from earlier passes are kept."""
        found = Inventory()
        for source in self.sources:
            try:
                found = found.merged(source.discover())
            except DiscoveryError as e:
                log.warning(
                    "Discovery source failed; keeping its last devices", extra={"source": source.name, "error": str(e)}
                )
        inventory = Inventory(
            gpus=self._remember("gpu", self._gpus, found.gpus, key=lambda g: g.uuid),
            rdma=self._remember("rdma", self._rdma, found.rdma, key=lambda r: r.bus_id),
            pci=found.pci,
            gpu_driver_version=found.gpu_driver_version or self._driver_version,
            simulated=found.simulated or self._simulated,
            isolation_provider=found.isolation_provider,  # what is installed now, not what was
        )
        self._driver_version = inventory.gpu_driver_version
        self._simulated = inventory.simulated
        if inventory != self._last:
            self._log_changed(inventory)
        self._last = inventory
        return inventory

    def close(self) -> None:
        for source in self.sources:
            source.close()

    def _remember(
        self, kind: str, known: dict[str, _D], present: tuple[_D, ...], *, key: Callable[[_D], str]
    ) -> tuple[_D, ...]:
        keyed = {key(d): d for d in present}
        taken = {d.minor for d in present}
        for device_id, old in list(known.items()):
            if device_id in keyed:
                if device_id in self._missing:
                    self._missing.discard(device_id)
                    log.info("Device discovered again", extra={"type": kind, "id": device_id})
            elif old.minor in taken:
                log.warning("Forgetting a missing device whose minor is taken", extra={"type": kind, "id": device_id})
                self._missing.discard(device_id)
                del known[device_id]
            elif device_id not in self._missing:
                self._missing.add(device_id)
                log.warning("Device no longer discovered; still reported", extra={"type": kind, "id": device_id})
        known.update(keyed)
        return tuple(sorted(known.values(), key=lambda d: d.minor))

    def _log_changed(self, inventory: Inventory) -> None:
        log.info(
            "Discovered devices",
            extra={
                "gpus": len(inventory.gpus),
                "rdma": len(inventory.rdma),
                "pci_functions": len(inventory.pci),
                "driver": inventory.gpu_driver_version,
                "simulated": inventory.simulated,
                "isolation_provider": inventory.isolation_provider,
            },
        )
        for g in inventory.gpus:
            log.log(
                V(2),
                "GPU",
                extra={
                    "minor": g.minor,
                    "uuid": g.uuid,
                    "model": g.model,
                    "numa": g.topology.node_id,
                    "pcie": g.topology.pcie_id,
                    "bus_id": g.bus_id,
                    "nvlink_peers": ",".join(map(str, g.nvlink_peers)),
                    "mig": g.mig_enabled,
                },
            )
        for r in inventory.rdma:
            log.log(
                V(2),
                "RDMA device",
                extra={
                    "minor": r.minor,
                    "ib_device": r.ib_device,
                    "bus_id": r.bus_id,
                    "pcie": r.topology.pcie_id,
                    "ports": ",".join(f"{p.number}:{p.state}" for p in r.ports),
                    "vfs": len(r.vfs),
                    "netdev": r.netdev.name if r.netdev else "",
                },
            )
