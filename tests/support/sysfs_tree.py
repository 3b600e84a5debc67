"""Writes a sysfs tree shaped as the kernel's for a node layout (a simulated-profile YAML).

The agent's sysfs readers are tested against these trees: real files and relative symlinks
resolving inside the tree, as on a host —

    devices/system/node/node0/cpulist, devices/system/cpu/cpu0/topology/physical_package_id
    devices/pci0000:17/0000:17:00.0/0000:18:00.0/{class,vendor,device,numa_node,driver->}
    bus/pci/devices/<bdf> -> ../../../devices/.../<bdf>      bus/pci/drivers/<drv>/<bdf> -> ...
    <nic>/infiniband/mlx5_0/ports/1/state ("4: ACTIVE"), <nic>/net/<ifname>/,
    <nic>/sriov_numvfs, <nic>/virtfn<N> -> ../<vf>, <vf>/physfn -> ../<pf>
    class/infiniband/mlx5_0 -> ../../devices/.../infiniband/mlx5_0

Besides the profile's devices it adds what every host has: a host bridge and a plain (non-RDMA)
virtio NIC without NUMA affinity, so readers must tell them apart.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent.discovery.simulated import Profile, SimulatedNIC

PORT_STATE_CODES = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4}
NVIDIA = 0x10DE
A100_DEVICE_ID = 0x20B2


class SysfsTree:
    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, profile: Profile) -> SysfsTree:
        for node, cpus in profile.numa_cpus.items():
            self.file(f"devices/system/node/node{node}/cpulist", cpus)
            first_cpu = int(cpus.replace(",", "-").split("-")[0])
            socket = next((s.socket for s in profile.gpus if s.numa_node == node), node)
            self.file(f"devices/system/cpu/cpu{first_cpu}/topology/physical_package_id", str(socket))
        for slot in profile.gpus:
            self.function(
                slot.pcie_root,
                slot.bus_id,
                class_code=0x030200,
                vendor=NVIDIA,
                device=A100_DEVICE_ID,
                numa_node=slot.numa_node,
                driver="nvidia",
            )
        ib_index = len(profile.nics)  # VFs get IB devices after every PF, as mlx5 numbers them
        for minor, nic in enumerate(profile.nics):
            ib_index = self._nic(profile, nic, minor, ib_index)
        self.function(
            "pci0000:00", "0000:00:00.0", class_code=0x060000, vendor=0x8086, device=0x0D57, numa_node=-1, driver=""
        )
        self.function(
            "pci0000:00",
            "0000:00:03.0",
            class_code=0x020000,
            vendor=0x1AF4,
            device=0x1041,
            numa_node=-1,
            driver="virtio-pci",
        )
        return self

    def _nic(self, profile: Profile, nic: SimulatedNIC, minor: int, ib_index: int) -> int:
        s = nic.slot
        pf = self.nic_function(s.pcie_root, s.bus_id, profile.nic_vendor_id, profile.nic_device_id, s.numa_node)
        self.ib_device(pf, f"mlx5_{minor}", nic.port_states)
        (pf / "net" / profile.netdev_name(nic)).mkdir(parents=True)
        self.file_at(pf / "sriov_totalvfs", "8")
        self.file_at(pf / "sriov_numvfs", str(nic.vfs))
        for index, vf_bus_id in enumerate(nic.vf_bus_ids()):
            vf = self.nic_function(s.pcie_root, vf_bus_id, profile.nic_vendor_id, profile.nic_vf_device_id, s.numa_node)
            _link(pf / f"virtfn{index}", vf)
            _link(vf / "physfn", pf)
            self.ib_device(vf, f"mlx5_{ib_index}", ("ACTIVE",))
            ib_index += 1
        return ib_index

    def nic_function(self, pcie_root: str, bus_id: str, vendor: int, device: int, numa_node: int) -> Path:
        return self.function(
            pcie_root,
            bus_id,
            class_code=0x020000,
            vendor=vendor,
            device=device,
            numa_node=numa_node,
            driver="mlx5_core",
        )

    def function(
        self,
        pcie_root: str,
        bus_id: str,
        *,
        class_code: int,
        vendor: int,
        device: int,
        numa_node: int,
        driver: str,
    ) -> Path:
        """A PCI function below `pcie_root`'s root port; returns its real directory."""
        domain, bus = pcie_root.removeprefix("pci").split(":")
        root_port = self.root / "devices" / pcie_root / f"{domain}:{bus}:00.0"
        path = root_port / bus_id if root_port.name != bus_id else root_port
        for name, value in (
            ("class", f"0x{class_code:06x}"),
            ("vendor", f"0x{vendor:04x}"),
            ("device", f"0x{device:04x}"),
        ):
            self.file_at(path / name, value)
        self.file_at(path / "numa_node", str(numa_node))
        _link(self.root / "bus" / "pci" / "devices" / bus_id, path)
        if driver:
            driver_dir = self.root / "bus" / "pci" / "drivers" / driver
            driver_dir.mkdir(parents=True, exist_ok=True)
            _link(driver_dir / bus_id, path)
            _link(path / "driver", driver_dir)
        return path

    def ib_device(self, function_dir: Path, name: str, port_states: tuple[str, ...]) -> None:
        for number, state in enumerate(port_states, start=1):
            self.set_port_state(function_dir / "infiniband" / name, number, state)
        _link(self.root / "class" / "infiniband" / name, function_dir / "infiniband" / name)

    def set_port_state(self, ib_dir: Path, port: int, state: str) -> None:
        self.file_at(ib_dir / "ports" / str(port) / "state", f"{PORT_STATE_CODES.get(state, 0)}: {state}")

    def pci_dir(self, bus_id: str) -> Path:
        return Path(os.path.realpath(self.root / "bus" / "pci" / "devices" / bus_id))

    def file(self, relative: str, text: str) -> Path:
        return self.file_at(self.root / relative, text)

    @staticmethod
    def file_at(path: Path, text: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
        return path


def _link(link: Path, target: Path) -> None:
    """A relative symlink, as sysfs has them."""
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))
