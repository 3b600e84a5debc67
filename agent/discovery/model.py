"""What discovery yields: plain, frozen facts about a node's devices.

Every discovery source (NVML, sysfs PCI, RDMA, simulated profiles) returns an `Inventory` of these
values; the Device CR builder, the health monitor and the metrics collector read them. They hold
no handles and do no I/O, so an inventory can be compared (`==`) to tell whether a node changed.
Topology reuses `apis.crds.device.DeviceTopology`, the shape the Device CR carries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apis.crds.device import DeviceTopology, VirtualFunction

__all__ = ["GPU", "IBPort", "Inventory", "LinkInfo", "PCIFunction", "RDMADevice", "label_value"]

#: PCI base class of network controllers (`class` >> 16), the class RDMA NICs have.
PCI_CLASS_NETWORK = 0x02
#: PCI base class of display controllers (GPUs report 0x0300 VGA or 0x0302 3D).
PCI_CLASS_DISPLAY = 0x03

_LABEL_INVALID = re.compile(r"[^A-Za-z0-9._-]+")


def label_value(text: str) -> str:
    """`text` as a valid Kubernetes label value: spaces and other characters become `-`.

    Label values are at most 63 characters of `[A-Za-z0-9._-]`, starting and ending alphanumeric;
    NVML names (`NVIDIA A100-SXM4-80GB`, `Tesla T4`) mostly are, apart from their spaces.
    """
    return _LABEL_INVALID.sub("-", text)[:63].strip("-_.")


@dataclass(frozen=True, slots=True)
class PCIFunction:
    """One PCI function as sysfs shows it under `bus/pci/devices/<bus_id>`."""

    bus_id: str  # `0000:3b:00.0`
    class_code: int  # 24 bits: base class, subclass, programming interface (`0x020000`)
    vendor_id: int
    device_id: int
    numa_node: int  # as sysfs says; -1 means "no affinity"
    pcie_root: str  # root complex from the resolved sysfs path, `pci0000:3a`; "" if unknown
    driver: str = ""  # bound driver's name, "" when none
    physfn: str = ""  # the PF's bus id when this function is an SR-IOV VF
    vfs: tuple[VirtualFunction, ...] = ()  # minor = the `virtfn<N>` index

    @property
    def base_class(self) -> int:
        return self.class_code >> 16

    @property
    def is_vf(self) -> bool:
        return bool(self.physfn)


@dataclass(frozen=True, slots=True)
class GPU:
    """A GPU as NVML (or a simulated profile) describes it, placed by sysfs."""

    uuid: str  # `GPU-8f3c…`, the Device CR's `id`
    minor: int  # /dev/nvidia<minor>
    name: str  # NVML's name, `NVIDIA A100-SXM4-80GB`
    memory_bytes: int
    topology: DeviceTopology
    vendor: str = "nvidia"
    #: NVML's architecture name (`Ampere`, `Hopper`); "" where NVML cannot tell.
    architecture: str = ""
    module_id: int | None = None  # SXM module id where NVML reports it
    mig_enabled: bool = False
    nvlink_peers: tuple[int, ...] = ()  # minors of GPUs joined to this one by NVLink

    @property
    def bus_id(self) -> str:
        return self.topology.bus_id

    @property
    def model(self) -> str:
        """The protocol's model label: NVML name without `NVIDIA `, spaces as `-` (`A100-SXM4-80GB`)."""
        return label_value(self.name.removeprefix("NVIDIA "))


@dataclass(frozen=True, slots=True)
class IBPort:
    number: int
    state: str  # `ACTIVE`, `DOWN`, `INIT`, `ARMED`, ... (the text after `4: ` in sysfs)

    @property
    def active(self) -> bool:
        return self.state == "ACTIVE"


@dataclass(frozen=True, slots=True)
class LinkInfo:
    """A network interface as netlink reports it."""

    name: str
    mac: str
    oper_state: str  # IFLA_OPERSTATE: `UP`, `DOWN`, `LOWERLAYERDOWN`, `UNKNOWN`, ...
    speed_mbps: int | None = None  # None when the driver does not say (no carrier, virtual links)

    @property
    def up(self) -> bool:
        return self.oper_state == "UP"


@dataclass(frozen=True, slots=True)
class RDMADevice:
    """An RDMA-capable physical function (a NIC port with an InfiniBand device)."""

    bus_id: str  # the Device CR's `id`
    minor: int  # from the IB device name: `mlx5_3` -> 3
    ib_device: str
    topology: DeviceTopology
    ports: tuple[IBPort, ...] = ()
    vfs: tuple[VirtualFunction, ...] = ()
    netdev: LinkInfo | None = None
    vendor_id: int = 0
    device_id: int = 0

    @property
    def ports_active(self) -> bool:
        """True when every port is ACTIVE (the protocol's RDMA health rule); False without ports."""
        return bool(self.ports) and all(p.active for p in self.ports)


@dataclass(frozen=True, slots=True)
class Inventory:
    """Everything one discovery pass found. Sources fill the parts they know; `merged` joins them."""

    gpus: tuple[GPU, ...] = ()
    rdma: tuple[RDMADevice, ...] = ()
    pci: tuple[PCIFunction, ...] = field(default=(), compare=False)  # informational; not part of "changed"
    gpu_driver_version: str = ""
    simulated: bool = False
    #: The GPU isolation layer installed on the node (`HAMi-core`), "" for none.
    isolation_provider: str = ""

    def merged(self, other: Inventory) -> Inventory:
        return Inventory(
            gpus=tuple(sorted((*self.gpus, *other.gpus), key=lambda g: g.minor)),
            rdma=tuple(sorted((*self.rdma, *other.rdma), key=lambda r: r.minor)),
            pci=tuple(sorted((*self.pci, *other.pci), key=lambda p: p.bus_id)),
            gpu_driver_version=self.gpu_driver_version or other.gpu_driver_version,
            simulated=self.simulated or other.simulated,
            isolation_provider=self.isolation_provider or other.isolation_provider,
        )
