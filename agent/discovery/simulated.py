"""Simulated devices: realistic GPU nodes for machines without GPUs (`--simulate-devices`).

A profile describes a node's layout — NUMA nodes, their PCIe roots, the GPUs and RDMA NICs behind
each root, which GPUs NVLink joins — in YAML: the built-in `a100-8x`, `h100-8x` (NVSwitch: all
GPUs joined), `a100-pcie-4x` (NVLink bridges joining pairs) and `t4-2x` (no NVLink), files in
`profiles/`, or a file of the same shape. `gpu.nvlink` is `true` (every GPU joined to every
other), `false`, or groups of GPU minors, each joined all to all (`[[0, 1], [2, 3]]`).

From a profile `SimulatedSource` reports an inventory marked `simulated` (the Device CR then
carries the `tessera.dev/simulated` label), and `Profile.fake_nvml` builds a `FakeNVML` with the
same GPUs, so health and metrics run their real code against it. `gpu.architecture` names the
GPUs' architecture as NVML does (`Ampere`); the node's ResourceSlices publish it. GPU UUIDs and MACs derive from
the node name and bus id: stable across restarts, distinct across nodes.

Minors follow bus order, as NVIDIA and mlx5 number devices: GPUs 0..n-1, NICs `mlx5_0`...

A profile also sizes the node itself (`NodeCapacity`: CPUs from the NUMA nodes' cpulists, memory
and pods from its `node:` section), which the agent's simulated kubelet registers as the Node's
capacity, and may say the node has a GPU isolation layer installed (`isolationProvider:
HAMi-core`: the Device CR, and through the controller the Node, then carry
`koordinator.sh/gpu-isolation-provider`).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources as importlib_resources
from pathlib import Path
from typing import Any

import yaml

from agent.discovery.fake_nvml import FakeGPU, FakeNVML
from agent.discovery.model import GPU, IBPort, Inventory, LinkInfo, RDMADevice
from agent.discovery.nvmllib import ARCHITECTURES
from agent.discovery.pci import BUS_ID
from apis.crds.device import DeviceTopology, VirtualFunction
from apis.errors import ConfigError, QuantityError
from apis.extension import names
from apis.k8s import quantity

__all__ = ["BUILTIN_PROFILES", "NodeCapacity", "Profile", "SimulatedNIC", "SimulatedSource", "load_profile"]

log = logging.getLogger(__name__)

BUILTIN_PROFILES = ("a100-8x", "h100-8x", "a100-pcie-4x", "t4-2x")
_UUID_NAMESPACE = uuid.UUID("6f1c2a9e-3b57-4c1e-9d0a-7e5b8f2d4c13")
_ARCHITECTURE_CODES = {arch: code for code, arch in ARCHITECTURES.items()}
#: What NVML answers for an architecture it does not know (`NVML_DEVICE_ARCH_UNKNOWN`).
_UNKNOWN_ARCHITECTURE = 0xFFFFFFFF
_DEFAULT_NODE_MEMORY = "256Gi"
_DEFAULT_MAX_PODS = 110  # kubelet's --max-pods default


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    """What the simulated node offers besides devices (the Node's `status.capacity`)."""

    cpus: int
    memory_bytes: int
    pods: int = _DEFAULT_MAX_PODS


@dataclass(frozen=True, slots=True)
class Slot:
    """Where one simulated device sits."""

    bus_id: str
    pcie_root: str
    numa_node: int
    socket: int

    @property
    def topology(self) -> DeviceTopology:
        return DeviceTopology(socket_id=self.socket, node_id=self.numa_node, pcie_id=self.pcie_root, bus_id=self.bus_id)


@dataclass(frozen=True, slots=True)
class SimulatedNIC:
    slot: Slot
    vfs: int
    port_states: tuple[str, ...]

    def vf_bus_ids(self) -> tuple[str, ...]:
        """mlx5 numbering: VF i at function i+2 of the PF's device, carrying into the next device."""
        prefix, _, devfn = self.slot.bus_id.rpartition(":")
        device = int(devfn.split(".")[0], 16)
        return tuple(f"{prefix}:{device + (i + 2) // 8:02x}.{(i + 2) % 8}" for i in range(self.vfs))


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    driver_version: str
    gpu_name: str
    gpu_memory_bytes: int
    #: Groups of GPU minors NVLink joins all to all (NVSwitch: one group of every GPU); disjoint.
    nvlink: tuple[tuple[int, ...], ...]
    sxm: bool
    gpus: tuple[Slot, ...]
    nics: tuple[SimulatedNIC, ...]
    numa_cpus: Mapping[int, str]  # NUMA node -> cpulist (`0-63`), for sysfs-shaped views
    node: NodeCapacity
    nic_vendor_id: int = 0x15B3
    nic_device_id: int = 0x101B
    nic_vf_device_id: int = 0x101C
    nic_speed_mbps: int = 100_000
    #: The GPU isolation layer the simulated node has installed (`isolationProvider`), "" for none.
    isolation_provider: str = ""
    #: NVML's architecture name of the GPUs (`gpu.architecture`: `Ampere`); "" unknown.
    gpu_architecture: str = ""

    def gpu_uuid(self, node_name: str, slot: Slot) -> str:
        return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{node_name}/{slot.bus_id}')}"

    def netdev_name(self, nic: SimulatedNIC) -> str:
        """systemd's predictable name for a PCI NIC port: `0000:0c:00.0` -> `enp12s0f0np0`."""
        _, bus, devfn = nic.slot.bus_id.split(":")
        device, function = devfn.split(".")
        return f"enp{int(bus, 16)}s{int(device, 16)}f{function}np0"

    def mac(self, node_name: str, nic: SimulatedNIC) -> str:
        digest = hashlib.sha256(f"{node_name}/{nic.slot.bus_id}".encode()).digest()
        return ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))  # locally administered

    def inventory(self, node_name: str) -> Inventory:
        minors = range(len(self.gpus))
        gpus = tuple(
            GPU(
                uuid=self.gpu_uuid(node_name, slot),
                minor=minor,
                name=self.gpu_name,
                architecture=self.gpu_architecture,
                memory_bytes=self.gpu_memory_bytes,
                topology=slot.topology,
                module_id=minor + 1 if self.sxm else None,
                nvlink_peers=self.nvlink_peers(minor),
            )
            for minor, slot in zip(minors, self.gpus, strict=True)
        )
        rdma = tuple(
            RDMADevice(
                bus_id=nic.slot.bus_id,
                minor=minor,
                ib_device=f"mlx5_{minor}",
                topology=nic.slot.topology,
                ports=tuple(IBPort(i + 1, s) for i, s in enumerate(nic.port_states)),
                vfs=tuple(VirtualFunction(i, b) for i, b in enumerate(nic.vf_bus_ids())),
                netdev=LinkInfo(
                    name=self.netdev_name(nic),
                    mac=self.mac(node_name, nic),
                    oper_state="UP" if all(s == "ACTIVE" for s in nic.port_states) else "DOWN",
                    speed_mbps=self.nic_speed_mbps,
                ),
                vendor_id=self.nic_vendor_id,
                device_id=self.nic_device_id,
            )
            for minor, nic in enumerate(self.nics)
        )
        return Inventory(
            gpus=gpus,
            rdma=rdma,
            gpu_driver_version=self.driver_version if gpus else "",
            simulated=True,
            isolation_provider=self.isolation_provider,
        )

    def nvlink_peers(self, minor: int) -> tuple[int, ...]:
        """Minors of the GPUs NVLink joins GPU `minor` to."""
        return tuple(sorted({m for group in self.nvlink if minor in group for m in group} - {minor}))

    def fake_nvml(self, node_name: str) -> FakeNVML:
        """An NVML with this profile's GPUs, for the health monitor and metrics collector."""
        bridge = {m: str(i) for i, group in enumerate(self.nvlink) for m in group}
        gpus = [
            FakeGPU(
                uuid=g.uuid,
                bus_id=g.bus_id,
                minor=g.minor,
                name=g.name,
                architecture=_ARCHITECTURE_CODES.get(g.architecture, _UNKNOWN_ARCHITECTURE),
                memory_total=g.memory_bytes,
                module_id=g.module_id,
                nvlink_bridge=bridge.get(g.minor, ""),
                temperature=34 + g.minor % 4,
            )
            for g in self.inventory(node_name).gpus
        ]
        return FakeNVML(gpus, driver_version=self.driver_version)


class SimulatedSource:
    """Discovery source reporting a profile's devices, marked simulated."""

    name = "simulated"

    def __init__(self, profile: Profile, node_name: str) -> None:
        self._inventory = profile.inventory(node_name)
        log.warning(
            "Reporting SIMULATED devices: no real hardware behind them",
            extra={"profile": profile.name, "gpus": len(profile.gpus), "rdma": len(profile.nics)},
        )

    def discover(self) -> Inventory:
        return self._inventory

    def close(self) -> None:
        return None


def load_profile(name_or_path: str) -> Profile:
    """A built-in profile by name, or a YAML file of the same shape. Raises ConfigError."""
    if name_or_path in BUILTIN_PROFILES:
        text = (importlib_resources.files("agent.discovery") / "profiles" / f"{name_or_path}.yaml").read_text()
        return parse_profile(yaml.safe_load(text), name=name_or_path)
    path = Path(name_or_path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(
            f"--simulate-devices {name_or_path}: not a built-in profile ({', '.join(BUILTIN_PROFILES)}) "
            f"and not a readable file: {e.strerror}"
        ) from e
    except yaml.YAMLError as e:
        raise ConfigError(f"simulated profile {path}: not valid YAML: {e}") from e
    return parse_profile(raw, name=path.stem)


def parse_profile(raw: object, *, name: str) -> Profile:
    """Validate a profile document; every problem is a ConfigError naming the field."""
    doc = _mapping(raw, name, "")
    gpu = _mapping(doc.get("gpu"), name, "gpu")
    nic = _mapping(doc.get("nic"), name, "nic")
    gpus: list[Slot] = []
    nics: list[SimulatedNIC] = []
    numa_cpus: dict[int, str] = {}
    for i, raw_node in enumerate(_list(doc.get("numaNodes"), name, "numaNodes")):
        where = f"numaNodes[{i}]"
        node = _mapping(raw_node, name, where)
        numa = _int(node.get("node", i), name, f"{where}.node")
        socket = _int(node.get("socket", numa), name, f"{where}.socket")
        numa_cpus[numa] = str(node.get("cpus", str(numa)))
        for j, raw_root in enumerate(_list(node.get("pcieRoots"), name, f"{where}.pcieRoots")):
            rwhere = f"{where}.pcieRoots[{j}]"
            root = _mapping(raw_root, name, rwhere)
            pcie = str(root.get("root", ""))
            if not pcie.startswith("pci"):
                raise ConfigError(f"simulated profile {name}: {rwhere}.root must look like pci0000:3a, got {pcie!r}")
            for k, bus in enumerate(_list(root.get("gpus"), name, f"{rwhere}.gpus")):
                gpus.append(Slot(_bus_id(bus, name, f"{rwhere}.gpus[{k}]"), pcie, numa, socket))
            for k, raw_nic in enumerate(_list(root.get("nics"), name, f"{rwhere}.nics")):
                nwhere = f"{rwhere}.nics[{k}]"
                entry = _mapping(raw_nic, name, nwhere)
                slot = Slot(_bus_id(entry.get("busID"), name, f"{nwhere}.busID"), pcie, numa, socket)
                states = tuple(str(s) for s in _list(entry.get("ports", ["ACTIVE"]), name, f"{nwhere}.ports"))
                nics.append(SimulatedNIC(slot, _int(entry.get("vfs", 0), name, f"{nwhere}.vfs"), states))
    bus_ids = [s.bus_id for s in gpus] + [n.slot.bus_id for n in nics]
    duplicates = sorted({b for b in bus_ids if bus_ids.count(b) > 1})
    if duplicates:
        raise ConfigError(f"simulated profile {name}: bus ids used twice: {', '.join(duplicates)}")
    return Profile(
        name=name,
        driver_version=str(doc.get("driverVersion", "535.161.08")),
        gpu_name=str(gpu.get("name", "NVIDIA A100-SXM4-80GB")),
        gpu_memory_bytes=_bytes(gpu.get("memory", "16Gi"), name, "gpu.memory"),
        nvlink=_nvlink(gpu.get("nvlink", False), len(gpus), name),
        sxm=bool(gpu.get("sxm", False)),
        gpus=tuple(sorted(gpus, key=lambda s: s.bus_id)),
        nics=tuple(sorted(nics, key=lambda n: n.slot.bus_id)),
        numa_cpus=numa_cpus,
        node=_node_capacity(_mapping(doc.get("node"), name, "node"), numa_cpus, name),
        nic_vendor_id=_int(nic.get("vendorID", 0x15B3), name, "nic.vendorID"),
        nic_device_id=_int(nic.get("deviceID", 0x101B), name, "nic.deviceID"),
        nic_vf_device_id=_int(nic.get("vfDeviceID", 0x101C), name, "nic.vfDeviceID"),
        nic_speed_mbps=_int(nic.get("speedMbps", 100_000), name, "nic.speedMbps"),
        isolation_provider=_isolation_provider(doc.get("isolationProvider", ""), name),
        gpu_architecture=_architecture(gpu.get("architecture", ""), name),
    )


def _architecture(raw: object, name: str) -> str:
    if raw != "" and raw not in _ARCHITECTURE_CODES:
        known = ", ".join(ARCHITECTURES.values())
        raise ConfigError(f"simulated profile {name}: gpu.architecture must be one of {known} (or absent), got {raw!r}")
    return str(raw)


def _isolation_provider(raw: object, name: str) -> str:
    if raw not in ("", names.GPU_ISOLATION_PROVIDER_HAMI_CORE):
        raise ConfigError(
            f"simulated profile {name}: isolationProvider must be {names.GPU_ISOLATION_PROVIDER_HAMI_CORE!r} "
            f"(or absent), got {raw!r}"
        )
    return str(raw)


def _nvlink(raw: object, count: int, name: str) -> tuple[tuple[int, ...], ...]:
    """`gpu.nvlink`: true (all GPUs joined), false, or disjoint groups of GPU minors."""
    if isinstance(raw, bool):
        return (tuple(range(count)),) if raw and count > 1 else ()
    seen: set[int] = set()
    groups = []
    for i, group in enumerate(_list(raw, name, "gpu.nvlink")):
        where = f"gpu.nvlink[{i}]"
        minors = tuple(_int(m, name, f"{where}[{j}]") for j, m in enumerate(_list(group, name, where)))
        bad = sorted(m for m in minors if m >= count or m in seen)
        if bad or len(set(minors)) != len(minors):
            raise ConfigError(
                f"simulated profile {name}: gpu.nvlink[{i}] must name GPU minors below {count}, each in one group, "
                f"got {list(minors)}"
            )
        seen.update(minors)
        groups.append(tuple(sorted(minors)))
    return tuple(g for g in groups if len(g) > 1)


def _node_capacity(node: Mapping[str, Any], numa_cpus: Mapping[int, str], name: str) -> NodeCapacity:
    """`node: {memory: 1Ti, pods: 110}`; CPUs are counted from the NUMA nodes' cpulists."""
    cpus = sum(_cpulist_size(cpus, name, f"numaNodes[node={numa}].cpus") for numa, cpus in numa_cpus.items())
    return NodeCapacity(
        cpus=max(cpus, 1),
        memory_bytes=_bytes(node.get("memory", _DEFAULT_NODE_MEMORY), name, "node.memory"),
        pods=_int(node.get("pods", _DEFAULT_MAX_PODS), name, "node.pods"),
    )


def _cpulist_size(text: str, name: str, where: str) -> int:
    """How many CPUs a kernel cpulist (`0-63`, `0-3,8-11`) names."""
    count = 0
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if not first.isdigit() or not (last or first).isdigit() or int(last or first) < int(first):
            raise ConfigError(f"simulated profile {name}: {where} must be a cpulist like 0-63, got {text!r}")
        count += int(last or first) - int(first) + 1
    return count


def _bytes(raw: object, name: str, where: str) -> int:
    try:
        return quantity.parse(raw).value()
    except QuantityError as e:
        raise ConfigError(f"simulated profile {name}: {where}: {e.reason}") from e


def _mapping(raw: object, name: str, where: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"simulated profile {name}: {where or 'document'} must be a mapping")
    return raw


def _list(raw: object, name: str, where: str) -> list[object]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"simulated profile {name}: {where} must be a list")
    return raw


def _int(raw: object, name: str, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ConfigError(f"simulated profile {name}: {where} must be a non-negative integer, got {raw!r}")
    return raw


def _bus_id(raw: object, name: str, where: str) -> str:
    if not isinstance(raw, str) or not BUS_ID.match(raw):
        raise ConfigError(f"simulated profile {name}: {where} must be a PCI address like 0000:3b:00.0, got {raw!r}")
    return raw
