"""Device discovery: which GPUs and RDMA NICs the node has, and where they sit.

One source per module behind `DeviceSource` (`source.py`): NVML GPUs (`nvml.py`), RDMA NICs
(`rdma.py`, with `netlink.py`), generic PCI enumeration (`pci.py`) and simulated profiles
(`simulated.py`). `open_discovery(DiscoverySettings(...))` picks them from the agent's flags and
`Discovery.run()` joins their findings into an `Inventory` (`model.py`). The NVML boundary is
`nvmllib.py` (Protocol + typed adapter); `fake_nvml.py` is its stand-in for machines without GPUs.
"""

from agent.discovery.combined import Discovery
from agent.discovery.model import GPU, IBPort, Inventory, LinkInfo, PCIFunction, RDMADevice
from agent.discovery.nvmllib import NVML, HandleCache, NVMLCallError, NVMLLibrary
from agent.discovery.settings import DiscoverySettings, DiscoveryStack, open_discovery
from agent.discovery.source import DeviceSource

__all__ = [
    "GPU",
    "NVML",
    "DeviceSource",
    "Discovery",
    "DiscoverySettings",
    "DiscoveryStack",
    "HandleCache",
    "IBPort",
    "Inventory",
    "LinkInfo",
    "NVMLCallError",
    "NVMLLibrary",
    "PCIFunction",
    "RDMADevice",
    "open_discovery",
]
