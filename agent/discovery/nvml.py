"""GPU discovery through NVML: which GPUs the node has, and where each sits.

GPUs are the PCI functions bound to the `nvidia` driver in sysfs (as Koordinator finds them); for
each, NVML gives UUID, minor, name, memory and module id, and sysfs the NUMA node and PCIe root.
Where sysfs lists none but NVML counts some (sysfs not mounted from the host), NVML's own list is
used. NVLink peers are asked once per set of GPUs and cached — those calls are slow on real
hardware. A GPU NVML cannot describe is skipped with a warning; the health monitor, not discovery,
decides whether a known GPU is lost.
"""

from __future__ import annotations

import dataclasses
import functools
import logging

from agent.discovery.model import GPU, PCI_CLASS_DISPLAY, Inventory, PCIFunction
from agent.discovery.nvmllib import NVML, Handle, NVMLCallError, if_supported
from agent.discovery.pci import PCIBus
from apis.crds.device import DeviceTopology

__all__ = ["NVMLSource"]

log = logging.getLogger(__name__)


class NVMLSource:
    """Discovery source for NVIDIA GPUs. `nvml` must be initialised by the caller (or None: no
    NVML on this machine, and the source reports no GPUs)."""

    name = "nvml"

    def __init__(self, nvml: NVML | None, bus: PCIBus) -> None:
        self._nvml = nvml
        self._bus = bus
        self._nvlink_cache: dict[frozenset[str], dict[str, tuple[int, ...]]] = {}

    def discover(self) -> Inventory:
        if self._nvml is None:
            return Inventory()
        nvml = self._nvml
        found: list[tuple[GPU, Handle]] = []
        for bus_id, fn, handle in self._handles(nvml):
            try:
                found.append((self._describe(nvml, bus_id, fn, handle), handle))
            except NVMLCallError as e:
                log.warning("Skipping GPU that NVML cannot describe", extra={"bus_id": bus_id, "error": str(e)})
        peers = self._nvlink_peers(nvml, found)
        gpus = tuple(
            dataclasses.replace(g, nvlink_peers=peers.get(g.uuid, ()))
            for g, _ in sorted(found, key=lambda f: f[0].minor)
        )
        return Inventory(gpus=gpus, gpu_driver_version=nvml.driver_version() if gpus else "")

    def close(self) -> None:
        return None

    def _handles(self, nvml: NVML) -> list[tuple[str, PCIFunction | None, Handle]]:
        """(bus id, its sysfs function, NVML handle) of every GPU. Functions bound to `nvidia`
        that are not display controllers (an NVSwitch, say) are not GPUs and are passed over."""
        functions = [self._bus.function(b) for b in self._bus.driver_addresses("nvidia")]
        gpus = [f for f in functions if f is not None and f.base_class == PCI_CLASS_DISPLAY]
        out: list[tuple[str, PCIFunction | None, Handle]] = []
        if gpus:
            for fn in gpus:
                try:
                    out.append((fn.bus_id, fn, nvml.handle_by_bus_id(fn.bus_id)))
                except NVMLCallError as e:
                    log.warning("GPU bound to nvidia has no NVML handle", extra={"bus_id": fn.bus_id, "error": str(e)})
            return out
        for index in range(nvml.count()):
            try:
                handle = nvml.handle_by_index(index)
                bus_id = nvml.bus_id(handle)
                out.append((bus_id, self._bus.function(bus_id), handle))
            except NVMLCallError as e:
                log.warning("Skipping GPU that NVML cannot open", extra={"index": index, "error": str(e)})
        return out

    def _describe(self, nvml: NVML, bus_id: str, fn: PCIFunction | None, handle: Handle) -> GPU:
        topology = self._bus.topology(fn) if fn is not None else DeviceTopology(socket_id=-1, bus_id=bus_id)
        return GPU(
            uuid=nvml.uuid(handle),
            minor=nvml.minor(handle),
            name=nvml.name(handle),
            memory_bytes=nvml.memory(handle)[0],
            topology=topology,
            architecture=if_supported(lambda: nvml.architecture(handle)) or "",
            module_id=if_supported(lambda: nvml.module_id(handle)),
            mig_enabled=bool(if_supported(lambda: nvml.mig_enabled(handle))),
        )

    def _nvlink_peers(self, nvml: NVML, found: list[tuple[GPU, Handle]]) -> dict[str, tuple[int, ...]]:
        """uuid -> minors of its NVLink peers; asked once per set of GPUs (slow NVML calls)."""
        key = frozenset(g.uuid for g, _ in found)
        cached = self._nvlink_cache.get(key)
        if cached is not None:
            return cached
        peers: dict[str, list[int]] = {g.uuid: [] for g, _ in found}
        for i, (a, ha) in enumerate(found):
            for b, hb in found[i + 1 :]:
                try:
                    linked = if_supported(functools.partial(nvml.nvlinked, ha, hb))
                except NVMLCallError as e:
                    log.warning("Cannot tell NVLink between GPUs", extra={"a": a.uuid, "b": b.uuid, "error": str(e)})
                    return {}  # not cached: asked again on the next pass
                if linked:
                    peers[a.uuid].append(b.minor)
                    peers[b.uuid].append(a.minor)
        result = {uuid: tuple(sorted(minors)) for uuid, minors in peers.items()}
        self._nvlink_cache = {key: result}
        return result
