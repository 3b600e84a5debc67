"""From the agent's flags to running discovery sources: `DiscoverySettings` -> `open_discovery`.

    --sysfs-root /sys            where sysfs is (a fixture tree in tests, the host's in a pod)
    --simulate-devices PROFILE   a100-8x | h100-8x | t4-2x | FILE: simulated GPUs and NICs instead
                                 of NVML and RDMA discovery (PCI enumeration stays real)
    --no-nvml, --no-netlink      skip NVML / the netlink lookups of RDMA netdevs

`open_discovery` initialises NVML once for the process (the same `NVML` then serves the health
monitor and the metrics collector) and turns a failing `nvmlInit` — no driver on this machine —
into one clear log line and no GPUs, never an error.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import pynvml

from agent.discovery.combined import Discovery
from agent.discovery.fake_nvml import FakeNVML
from agent.discovery.isolation import HAMiCoreSource
from agent.discovery.netlink import LinkReader
from agent.discovery.nvml import NVMLSource
from agent.discovery.nvmllib import NVML, NVMLCallError, NVMLLibrary
from agent.discovery.pci import PCIBus, PCISource
from agent.discovery.rdma import RDMASource
from agent.discovery.simulated import Profile, SimulatedSource, load_profile
from agent.discovery.source import DeviceSource

__all__ = ["DiscoverySettings", "DiscoveryStack", "open_discovery", "open_nvml"]

log = logging.getLogger(__name__)

_NO_DRIVER = (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED)


@dataclass(frozen=True, slots=True)
class DiscoverySettings:
    node_name: str
    sysfs_root: Path = Path("/sys")
    simulate: str = ""  # a built-in profile name or a YAML file; "" for real hardware
    nvml: bool = True
    netlink: bool = True


@dataclass
class DiscoveryStack:
    """What `open_discovery` built. `nvml` is initialised, or None when there is none to use.

    For a simulated profile, `fake` is the FakeNVML behind `nvml`: its control surface
    (`inject_xid`, `vanish`, `reset`) is how the agent's fault-injection endpoint breaks a
    simulated GPU. It is None with real devices, so nothing can inject faults there.
    """

    discovery: Discovery
    bus: PCIBus
    nvml: NVML | None = None
    profile: Profile | None = None
    fake: FakeNVML | None = None
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        """Close the sources and shut NVML down. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.discovery.close()
        if self.nvml is not None:
            try:
                self.nvml.shutdown()
            except NVMLCallError as e:
                log.warning("NVML shutdown failed", extra={"error": str(e)})


def open_nvml(lib: NVMLLibrary) -> NVML | None:
    """`nvmlInit`, or None with one log line saying why GPUs will not be reported."""
    nvml = NVML(lib)
    try:
        nvml.init()
    except NVMLCallError as e:
        if e.code in _NO_DRIVER:
            log.info("No NVIDIA driver: NVML unavailable, reporting no GPUs", extra={"error": str(e)})
        else:
            log.warning("NVML failed to initialise: reporting no GPUs", extra={"error": str(e)})
        return None
    return nvml


def open_discovery(
    settings: DiscoverySettings, *, nvml_library: NVMLLibrary | None = None, hami_core_library: Path | None = None
) -> DiscoveryStack:
    """Build the sources the settings ask for. `nvml_library` defaults to `pynvml` (tests pass a
    FakeNVML); `hami_core_library`, where HAMi-core's library would be (None: not looked for;
    a simulated node takes its profile's word). Raises ConfigError for a bad simulated profile —
    at start-up, never later."""
    bus = PCIBus(settings.sysfs_root)
    sources: list[DeviceSource] = [PCISource(bus)]
    if settings.simulate:
        profile = load_profile(settings.simulate)
        sources.append(SimulatedSource(profile, settings.node_name))
        fake = profile.fake_nvml(settings.node_name)
        return DiscoveryStack(Discovery(sources), bus, open_nvml(fake), profile, fake)
    nvml = open_nvml(nvml_library if nvml_library is not None else pynvml) if settings.nvml else None
    sources.append(NVMLSource(nvml, bus))
    sources.append(RDMASource(bus, LinkReader() if settings.netlink else None))
    if hami_core_library is not None:
        sources.append(HAMiCoreSource(hami_core_library))
    return DiscoveryStack(Discovery(sources), bus, nvml)
