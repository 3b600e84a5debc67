"""Generic PCI enumeration from sysfs: class, ids, NUMA node, PCIe root, driver, SR-IOV VFs.

The NVML and RDMA sources place their devices with it, and `PCISource` reports every function
(the agent's view of "what is on this bus"). The sysfs root is a parameter so tests point it at a
fixture tree; the layout read is the kernel's:

    bus/pci/devices/<bdf> -> ../../../devices/pci0000:3a/0000:3a:00.0/<bdf>
        class vendor device numa_node   driver -> .../drivers/<name>
        physfn -> ../<pf bdf>            (on a VF)
        sriov_numvfs, virtfn<N> -> ../<vf bdf>   (on a PF)

A file that is missing or unreadable, or holds something unexpected, gives a warning naming the
device and the file; the function is skipped (or the field defaulted), never a crash.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from agent.discovery.model import Inventory, PCIFunction
from apis.crds.device import DeviceTopology, VirtualFunction
from apis.errors import DiscoveryError

__all__ = ["PCIBus", "PCISource"]

log = logging.getLogger(__name__)

BUS_ID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_ROOT = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
_VIRTFN = re.compile(r"^virtfn(\d+)$")


class PCIBus:
    """Reads PCI functions under `<sysfs_root>/bus/pci/devices`; cheap, and caches nothing."""

    def __init__(self, sysfs_root: Path = Path("/sys")) -> None:
        self.sysfs_root = sysfs_root
        self.devices_dir = sysfs_root / "bus" / "pci" / "devices"

    def addresses(self) -> list[str]:
        """Sorted bus ids of every function. Raises DiscoveryError when the directory is unreadable."""
        return self._list_bus_ids(self.devices_dir)

    def driver_addresses(self, driver: str) -> list[str]:
        """Sorted bus ids bound to `driver` (`bus/pci/drivers/<driver>/<bdf>`); [] without the driver."""
        directory = self.sysfs_root / "bus" / "pci" / "drivers" / driver
        if not directory.is_dir():
            return []
        return self._list_bus_ids(directory)

    def device_dir(self, bus_id: str) -> Path:
        return self.devices_dir / bus_id

    def function(self, bus_id: str) -> PCIFunction | None:
        """The function at `bus_id`, or None (with a warning) when it is gone or unreadable."""
        path = self.devices_dir / bus_id
        try:
            class_code = int(_read(path / "class"), 16)
            vendor_id = int(_read(path / "vendor"), 16)
            device_id = int(_read(path / "device"), 16)
        except FileNotFoundError:
            log.warning("PCI function vanished while reading it", extra={"bus_id": bus_id})
            return None
        except (OSError, ValueError) as e:
            log.warning("Skipping PCI function with unreadable ids", extra={"bus_id": bus_id, "error": str(e)})
            return None
        return PCIFunction(
            bus_id=bus_id,
            class_code=class_code,
            vendor_id=vendor_id,
            device_id=device_id,
            numa_node=self._numa_node(path),
            pcie_root=self._pcie_root(path),
            driver=_link_name(path / "driver"),
            physfn=_link_name(path / "physfn"),
            vfs=self._vfs(path),
        )

    def topology(self, fn: PCIFunction) -> DeviceTopology:
        """Where `fn` sits, as the Device CR says it: socket, NUMA node (-1 becomes 0), root, bus id."""
        node = max(fn.numa_node, 0)
        return DeviceTopology(socket_id=self.socket_of(node), node_id=node, pcie_id=fn.pcie_root, bus_id=fn.bus_id)

    def socket_of(self, numa_node: int) -> int:
        """The CPU package of a NUMA node's first CPU, or -1 (Koordinator's "unknown") when unreadable."""
        system = self.sysfs_root / "devices" / "system"
        try:
            cpulist = _read(system / "node" / f"node{numa_node}" / "cpulist")
            first_cpu = int(re.split(r"[-,]", cpulist, maxsplit=1)[0])
            return int(_read(system / "cpu" / f"cpu{first_cpu}" / "topology" / "physical_package_id"))
        except (OSError, ValueError):
            return -1

    def functions(self) -> list[PCIFunction]:
        """Every readable function, sorted by bus id. Raises DiscoveryError without a PCI bus dir."""
        return [f for f in (self.function(b) for b in self.addresses()) if f is not None]

    def _list_bus_ids(self, directory: Path) -> list[str]:
        try:
            names = os.listdir(directory)
        except OSError as e:
            raise DiscoveryError(f"sysfs {directory}: cannot list PCI devices: {e}") from e
        return sorted(n for n in names if BUS_ID.match(n))

    def _numa_node(self, path: Path) -> int:
        try:
            return int(_read(path / "numa_node"))
        except FileNotFoundError:
            return -1  # kernels without NUMA have no such file
        except (OSError, ValueError) as e:
            log.warning("Unreadable numa_node; assuming none", extra={"bus_id": path.name, "error": str(e)})
            return -1

    def _pcie_root(self, path: Path) -> str:
        """The `pciDDDD:BB` component of the device's resolved path: its PCIe root complex."""
        resolved = Path(os.path.realpath(path))
        roots = [part for part in resolved.parts if _ROOT.match(part)]
        if not roots:
            log.warning("No PCIe root in the device path", extra={"bus_id": path.name, "path": str(resolved)})
            return ""
        return roots[0]

    def _vfs(self, path: Path) -> tuple[VirtualFunction, ...]:
        try:
            if int(_read(path / "sriov_numvfs")) <= 0:
                return ()
            names = os.listdir(path)
        except FileNotFoundError:
            return ()  # not SR-IOV capable
        except (OSError, ValueError) as e:
            log.warning("Unreadable SR-IOV state; reporting no VFs", extra={"bus_id": path.name, "error": str(e)})
            return ()
        vfs = []
        for name in names:
            match = _VIRTFN.match(name)
            if match:
                vf_bus_id = _link_name(path / name)
                if vf_bus_id:
                    vfs.append(VirtualFunction(minor=int(match.group(1)), bus_id=vf_bus_id))
        return tuple(sorted(vfs, key=lambda v: v.minor))


class PCISource:
    """Discovery source listing every PCI function (`Inventory.pci`)."""

    name = "pci"

    def __init__(self, bus: PCIBus) -> None:
        self._bus = bus

    def discover(self) -> Inventory:
        return Inventory(pci=tuple(self._bus.functions()))

    def close(self) -> None:
        return None


def _read(path: Path) -> str:
    return path.read_text().strip()


def _link_name(path: Path) -> str:
    """Basename of a symlink's target (`driver -> ../../bus/pci/drivers/nvidia` gives `nvidia`)."""
    try:
        return os.path.basename(os.readlink(path))
    except OSError:
        return ""
