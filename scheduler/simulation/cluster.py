"""Synthetic nodes with a realistic device layout, for the benchmark, the trace replay and tests.

A GPU server as it is usually built: GPUs spread evenly over NUMA nodes, each NUMA node with
PCIe switches, and one RDMA NIC (with SR-IOV virtual functions) on each switch beside its GPUs.
`gpu_node(8 GPUs)` gives 2 NUMA × 2 switches × 2 GPUs + 4 NICs: the layout the DeviceShare
topology cases are written against. Deterministic: names, UUIDs and bus IDs follow the indices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.crds.device import Device, DeviceInfo, DeviceTopology, DeviceType, VirtualFunction, VirtualFunctionGroup
from apis.extension import names
from apis.k8s.core import Node
from apis.k8s.meta import ObjectMeta

__all__ = ["GIB", "NodeShape", "gpu_node"]

GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class NodeShape:
    """How a synthetic node is built."""

    gpus: int = 8
    gpu_model: str = "A100-SXM4-80GB"
    gpu_memory: int = 80 * GIB
    numa_nodes: int = 2
    pcie_per_numa: int = 2
    #: One RDMA NIC per PCIe switch, with this many VFs (0: no NICs).
    nics_per_switch: int = 1
    vfs_per_nic: int = 4
    milli_cpu: int = 128_000
    memory: int = 1024 * GIB
    max_pods: int = 256
    unhealthy_gpus: frozenset[int] = frozenset()
    labels: Mapping[str, str] = field(default_factory=dict)


def _layout(shape: NodeShape) -> tuple[int, int]:
    """(NUMA nodes, switches per NUMA node) that the GPU count can fill evenly."""
    numa = shape.numa_nodes if shape.gpus >= shape.numa_nodes and shape.gpus % shape.numa_nodes == 0 else 1
    per_numa = shape.gpus // numa if numa else 0
    switches = shape.pcie_per_numa if per_numa >= shape.pcie_per_numa and per_numa % shape.pcie_per_numa == 0 else 1
    return numa, switches


def gpu_node(name: str, shape: NodeShape = NodeShape()) -> tuple[Node, Device]:
    """A Node (allocatable as the controller would publish it) and its Device CR."""
    numa, switches = _layout(shape)
    total_switches = max(numa * switches, 1)
    gpus_per_switch = max(shape.gpus // total_switches, 1)
    devices: list[DeviceInfo] = []
    for minor in range(shape.gpus):
        switch = min(minor // gpus_per_switch, total_switches - 1)
        devices.append(
            DeviceInfo(
                type=DeviceType.GPU,
                minor=minor,
                id=f"GPU-{name}-{minor:02d}",
                health=minor not in shape.unhealthy_gpus,
                resources={
                    names.GPU_CORE: 100,
                    names.GPU_MEMORY: shape.gpu_memory,
                    names.GPU_MEMORY_RATIO: 100,
                },
                topology=DeviceTopology(
                    socket_id=switch // switches,
                    node_id=switch // switches,
                    pcie_id=_pcie(switch),
                    bus_id=f"0000:{_bus(switch) + 1 + minor % gpus_per_switch:02x}:00.0",
                ),
            )
        )
    if shape.gpus and shape.nics_per_switch:
        for switch in range(total_switches):
            for nic in range(shape.nics_per_switch):
                minor = switch * shape.nics_per_switch + nic
                bus = _bus(switch) + 0x0F - nic
                vfs = tuple(
                    VirtualFunction(minor=vf, bus_id=f"0000:{bus:02x}:00.{vf + 1}") for vf in range(shape.vfs_per_nic)
                )
                devices.append(
                    DeviceInfo(
                        type=DeviceType.RDMA,
                        minor=minor,
                        id=f"0000:{bus:02x}:00.0",
                        health=True,
                        resources={names.RDMA: 100},
                        topology=DeviceTopology(
                            socket_id=switch // switches,
                            node_id=switch // switches,
                            pcie_id=_pcie(switch),
                            bus_id=f"0000:{bus:02x}:00.0",
                        ),
                        vf_groups=(VirtualFunctionGroup(labels={"type": "general"}, vfs=vfs),) if vfs else (),
                    )
                )
    healthy = shape.gpus - len(shape.unhealthy_gpus & set(range(shape.gpus)))
    allocatable = {
        names.CPU: shape.milli_cpu,
        names.MEMORY: shape.memory,
        names.PODS: shape.max_pods,
    }
    if healthy:
        allocatable.update(
            {
                names.GPU_CORE: 100 * healthy,
                names.GPU_MEMORY_RATIO: 100 * healthy,
                names.GPU_MEMORY: shape.gpu_memory * healthy,
            }
        )
    labels = dict(shape.labels)
    if shape.gpus:
        labels.setdefault(names.LABEL_GPU_MODEL, shape.gpu_model)
    node = Node(meta=ObjectMeta(name=name, labels=labels), allocatable=allocatable, capacity=dict(allocatable))
    device = Device(meta=ObjectMeta(name=name), devices=tuple(sorted(devices, key=lambda d: d.sort_key)))
    return node, device


def _pcie(switch: int) -> str:
    return f"pci0000:{_bus(switch):02x}"


def _bus(switch: int) -> int:
    return 0x10 + 0x20 * switch
