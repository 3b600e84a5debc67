"""The one interface every discovery source implements.

A source knows one kind of fact (NVML GPUs, RDMA NICs, PCI functions, a simulated profile) and
returns it as an `Inventory`. `Discovery` runs the configured sources and joins their results.
"""

from __future__ import annotations

from typing import Protocol

from agent.discovery.model import Inventory

__all__ = ["DeviceSource"]


class DeviceSource(Protocol):
    #: Short name for logs (`nvml`, `rdma`, `pci`, `simulated`).
    name: str

    def discover(self) -> Inventory:
        """What the source sees now. Bad input about one device is logged and the device skipped;
        raises DiscoveryError only when the source as a whole cannot answer. May block briefly
        (sysfs reads, NVML calls); call it from the agent's discovery loop, not a hot path."""
        ...

    def close(self) -> None:
        """Release what the source holds. Idempotent."""
        ...
