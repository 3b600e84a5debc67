"""RDMA NIC discovery from sysfs, with each NIC's netdev described over netlink.

An RDMA device is a network-class (0x02) PCI function that is not a VF and has an InfiniBand
device under `<bdf>/infiniband/` named `<driver>_<minor>` (`mlx5_3`: minor 3), as mlx4/mlx5
name them; other names (`rocep26s0f1` after a udev rename) give no minor and are skipped. Port
states (`infiniband/<dev>/ports/<n>/state`, `4: ACTIVE`) give health — every port ACTIVE — and
`virtfn<N>` links the SR-IOV VFs. The netdev under `<bdf>/net/` is looked up through
netlink for its name, MAC, link state and speed.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from agent.discovery.model import PCI_CLASS_NETWORK, IBPort, Inventory, LinkInfo, PCIFunction, RDMADevice
from agent.discovery.netlink import LinkReader
from agent.discovery.pci import PCIBus
from apis.errors import DiscoveryError

__all__ = ["RDMASource", "port_states"]

log = logging.getLogger(__name__)

_MINOR = re.compile(r"_(\d+)$")  # `mlx5_3` -> 3


def port_states(device_dir: Path, ib_device: str) -> tuple[IBPort, ...]:
    """Ports of `ib_device` under the PCI function's sysfs dir, sorted by number.

    Raises DiscoveryError when the ports cannot be listed (the device is gone); a single port
    whose state file is unreadable reads as state `UNKNOWN`.
    """
    ports_dir = device_dir / "infiniband" / ib_device / "ports"
    try:
        names = os.listdir(ports_dir)
    except OSError as e:
        raise DiscoveryError(f"sysfs {ports_dir}: cannot list ports: {e}") from e
    ports = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            text = (ports_dir / name / "state").read_text().strip()
        except OSError:
            text = ""
        state = text.partition(":")[2].strip() if ":" in text else text
        ports.append(IBPort(number=int(name), state=state or "UNKNOWN"))
    return tuple(sorted(ports, key=lambda p: p.number))


class RDMASource:
    """Discovery source for RDMA NICs. `links` is None to skip netlink (no netdev facts)."""

    name = "rdma"

    def __init__(self, bus: PCIBus, links: LinkReader | None = None) -> None:
        self._bus = bus
        self._links = links

    def discover(self) -> Inventory:
        devices: dict[int, RDMADevice] = {}
        for fn in self._bus.functions():
            if fn.base_class != PCI_CLASS_NETWORK or fn.is_vf:
                continue
            for device in self._describe(fn):
                other = devices.get(device.minor)
                if other is not None:
                    log.warning(
                        "Skipping RDMA device whose minor is taken",
                        extra={"ib_device": device.ib_device, "minor": device.minor, "taken_by": other.ib_device},
                    )
                    continue
                devices[device.minor] = device
        return Inventory(rdma=tuple(devices[m] for m in sorted(devices)))

    def close(self) -> None:
        return None

    def _describe(self, fn: PCIFunction) -> list[RDMADevice]:
        device_dir = self._bus.device_dir(fn.bus_id)
        try:
            ib_devices = sorted(os.listdir(device_dir / "infiniband"))
        except FileNotFoundError:
            return []  # a plain NIC, no RDMA
        except OSError as e:
            log.warning("Cannot list InfiniBand devices", extra={"bus_id": fn.bus_id, "error": str(e)})
            return []
        out = []
        for ib in ib_devices:
            match = _MINOR.search(ib)
            if match is None:
                log.warning("Skipping IB device not named like mlx5_<minor>", extra={"ib_device": ib})
                continue
            try:
                ports = port_states(device_dir, ib)
            except DiscoveryError as e:
                log.warning("Skipping IB device with unreadable ports", extra={"ib_device": ib, "error": str(e)})
                continue
            out.append(
                RDMADevice(
                    bus_id=fn.bus_id,
                    minor=int(match.group(1)),
                    ib_device=ib,
                    topology=self._bus.topology(fn),
                    ports=ports,
                    vfs=fn.vfs,
                    netdev=self._netdev(device_dir),
                    vendor_id=fn.vendor_id,
                    device_id=fn.device_id,
                )
            )
        return out

    def _netdev(self, device_dir: Path) -> LinkInfo | None:
        if self._links is None:
            return None
        try:
            names = sorted(os.listdir(device_dir / "net"))
        except OSError:
            return None  # an IB-only port has no netdev
        if not names:
            return None
        try:
            info = self._links.read(names[0])
        except DiscoveryError as e:
            log.warning("Cannot read the NIC's netdev", extra={"interface": names[0], "error": str(e)})
            return None
        if info is None:
            log.warning("NIC's netdev not found over netlink", extra={"interface": names[0]})
        return info
