"""Build the node's DRA devices (ResourceSlice pools) from what discovery found and what the health tracker says.

The same inputs as the Device CR (`agent/devices/cr.py`), the same purity: equal inventory and
health give equal pools, so the writer (`agent/devices/slicewriter.py`) compares them with what
the API server holds and skips no-op writes. Two pools, each named after the node:

- `gpu.tessera.dev` (apis/dra/gpus.py's convention): one device `gpu-<minor>` per GPU, shareable
  (`allowMultipleAllocations`) with the capacities `cores` (100) and `memory` (bytes), and the
  attributes `minor`, `uuid`, `productName`, `architecture`, `driverVersion`, `numaNode`,
  `nvlinkGroup` and kube's `resource.kubernetes.io/pcieRoot` / `pciBusID`;
- `rdma.tessera.dev` (apis/dra/nics.py): one device per RDMA PF and one per VF.

Health: where the Device CR marks a device unhealthy (`health: false`, no resources), its DRA
device stays listed with the NoSchedule taint `<driver>/unhealthy=<reason>`, `timeAdded` the time
it turned unhealthy; a PF's VFs carry their PF's taint. So the two views match device for device:
every Device CR entry is one DRA device (a PF's VFs are more), and its health is the taint.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from agent.devices.cr import nvlink_peers
from agent.discovery.model import GPU, Inventory, RDMADevice, label_value
from agent.health.tracker import Health
from apis.crds.device import DeviceTopology
from apis.dra import gpus, nics
from apis.dra import names as dra_names
from apis.dra.slice import AttributeType, Device, DeviceAttribute, DeviceCapacity, DeviceTaint, TaintEffect
from apis.k8s.quantity import Format, Quantity

__all__ = ["Pool", "build_pools", "gpu_device_name", "rdma_device_name", "semver"]

_HEALTHY = Health()
#: kube's limit on a string attribute's length.
_MAX_STRING = 64
_VERSION_PART = re.compile(r"^\d+$")


@dataclass(frozen=True, slots=True)
class Pool:
    """One driver's devices on this node: the pool named after the node, as a list of devices
    (the writer splits it into slices)."""

    driver: str
    name: str
    devices: tuple[Device, ...]


def gpu_device_name(minor: int) -> str:
    return f"gpu-{minor}"


def rdma_device_name(minor: int, vf: int | None = None) -> str:
    return f"rdma-{minor}" if vf is None else f"rdma-{minor}-vf-{vf}"


def build_pools(inventory: Inventory, health: Mapping[str, Health], *, node_name: str) -> tuple[Pool, Pool]:
    """The GPU pool and the RDMA pool of `node_name` (either may have no devices). `health` maps
    a device's Device CR `id` (GPU UUID, PF bus id) to its Health; missing means healthy."""
    groups = _nvlink_groups(inventory)
    version = semver(inventory.gpu_driver_version)
    gpu_devices = tuple(
        _gpu(g, health.get(g.uuid, _HEALTHY), driver_version=version, nvlink_group=groups.get(g.minor))
        for g in sorted(inventory.gpus, key=lambda g: g.minor)
    )
    rdma_devices = tuple(
        d for r in sorted(inventory.rdma, key=lambda r: r.minor) for d in _rdma(r, health.get(r.bus_id, _HEALTHY))
    )
    return Pool(gpus.DRIVER, node_name, gpu_devices), Pool(nics.DRIVER, node_name, rdma_devices)


def semver(version: str) -> str:
    """NVIDIA's driver version as Semantic Versioning (kube's `version` attributes): `535.161.08`
    → `535.161.8`, `550.54` → `550.54.0`; "" when it is not dotted numbers."""
    parts = version.strip().split(".")
    if not version or len(parts) > 3 or not all(_VERSION_PART.match(p) for p in parts):
        return ""
    return ".".join(str(int(p)) for p in (*parts, "0", "0")[:3])


def _nvlink_groups(inventory: Inventory) -> dict[int, int]:
    """GPU minor -> the lowest minor of the GPUs NVLink joins it with (its connected component);
    GPUs without NVLink have none."""
    links = nvlink_peers(inventory)
    group: dict[int, int] = {}
    for start in sorted(links):
        if start in group:
            continue
        seen, todo = {start}, [start]
        while todo:
            for peer in links.get(todo.pop(), frozenset()):
                if peer not in seen:
                    seen.add(peer)
                    todo.append(peer)
        group.update(dict.fromkeys(seen, min(seen)))
    return group


def _int(value: int) -> DeviceAttribute:
    return DeviceAttribute(AttributeType.INT, (value,))


def _string(value: str) -> DeviceAttribute:
    return DeviceAttribute(AttributeType.STRING, (value[:_MAX_STRING],))


def _placement(topology: DeviceTopology, bus_id: str, *, numa_node: str) -> dict[str, DeviceAttribute]:
    """NUMA node (where it has one, as attribute `numa_node`) and kube's standard PCI attributes
    (where known)."""
    out: dict[str, DeviceAttribute] = {}
    if topology.node_id >= 0:
        out[numa_node] = _int(topology.node_id)
    if topology.pcie_id:
        out[dra_names.PCIE_ROOT] = _string(topology.pcie_id)
    if bus_id:
        out[dra_names.PCI_BUS_ID] = _string(bus_id)
    return out


def _taints(key: str, health: Health) -> tuple[DeviceTaint, ...]:
    if health.healthy:
        return ()
    value = label_value(health.reason) if health.reason else ""
    return (DeviceTaint(key=key, effect=TaintEffect.NO_SCHEDULE.value, value=value, time_added=health.since),)


def _gpu(gpu: GPU, health: Health, *, driver_version: str, nvlink_group: int | None) -> Device:
    attributes = {
        gpus.MINOR: _int(gpu.minor),
        gpus.UUID: _string(gpu.uuid),
        gpus.PRODUCT_NAME: _string(gpu.name),
        **_placement(gpu.topology, gpu.bus_id, numa_node=gpus.NUMA_NODE),
    }
    if gpu.architecture:
        attributes[gpus.ARCHITECTURE] = _string(gpu.architecture)
    if driver_version:
        attributes[gpus.DRIVER_VERSION] = DeviceAttribute(AttributeType.VERSION, (driver_version,))
    if nvlink_group is not None:
        attributes[gpus.NVLINK_GROUP] = _int(nvlink_group)
    return Device(
        name=gpu_device_name(gpu.minor),
        attributes=dict(sorted(attributes.items())),
        capacity={
            gpus.CORES: DeviceCapacity(Quantity.from_int(100), gpus.CORES_POLICY),
            gpus.MEMORY: DeviceCapacity(Quantity.from_int(gpu.memory_bytes, Format.BINARY_SI)),
        },
        taints=_taints(gpus.UNHEALTHY_TAINT, health),
        allow_multiple_allocations=True,
    )


def _rdma(nic: RDMADevice, health: Health) -> list[Device]:
    taints = _taints(nics.UNHEALTHY_TAINT, health)
    common = {
        nics.MINOR: _int(nic.minor),
        nics.IB_DEVICE: _string(nic.ib_device),
        **_placement(nic.topology, "", numa_node=nics.NUMA_NODE),
    }
    pf = Device(
        name=rdma_device_name(nic.minor),
        attributes=dict(
            sorted(
                {
                    **common,
                    **_placement(nic.topology, nic.bus_id, numa_node=nics.NUMA_NODE),
                    nics.TYPE: _string(nics.TYPE_PF),
                }.items()
            )
        ),
        taints=taints,
    )
    vfs = [
        Device(
            name=rdma_device_name(nic.minor, vf.minor if vf.minor >= 0 else i),
            attributes=dict(
                sorted(
                    {
                        **common,
                        **_placement(nic.topology, vf.bus_id, numa_node=nics.NUMA_NODE),
                        nics.TYPE: _string(nics.TYPE_VF),
                    }.items()
                )
            ),
            taints=taints,
        )
        for i, vf in enumerate(nic.vfs)
    ]
    return [pf, *vfs]
