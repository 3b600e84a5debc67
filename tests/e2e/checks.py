"""What must hold of a cluster at any time, as lists of problems (empty: all is well).

Pure functions over `apis` types read from the API server, so a failing assertion says exactly
which pod, node or device is wrong. They recompute everything from the Device CRs and the pods'
annotations independently of the components under test, except capacity accounting, which is
`cli.bench.scheduler_e2e.check_allocations` (shared with the scheduler's own acceptance test).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from apis.crds.device import Device, DeviceInfo, DeviceType
from apis.extension import allocation, names
from apis.extension.devicerequest import pod_device_requests
from apis.k8s.core import Node, Pod
from cli.bench.scheduler_e2e import check_allocations

__all__ = ["allocatable_problems", "allocation_problems", "gpus_of"]

_MANAGED = (names.GPU_CORE, names.GPU_MEMORY, names.GPU_MEMORY_RATIO, names.KOORD_GPU, names.RDMA)


def gpus_of(pod: Pod) -> list[int]:
    """The GPU minors a bound pod was given (its `device-allocated` annotation)."""
    return [a.minor for a in allocation.from_pod_annotations(pod.annotations).get(DeviceType.GPU, ())]


def allocation_problems(pods: Iterable[Pod], devices: Mapping[str, Device]) -> list[str]:
    """Bound pods hold what they asked for, on devices their node has, none over-committed."""
    bound = [p for p in pods if p.node_name]
    problems = []
    if over := check_allocations(list(devices.values()), bound):
        problems.append(f"{over} devices over-committed or unknown to their node's Device CR")
    held_vfs: Counter[tuple[str, int, int]] = Counter()
    for pod in bound:
        allocated = allocation.from_pod_annotations(pod.annotations, obj=pod.key)
        problems += _request_problems(pod, allocated)
        for nic in allocated.get(DeviceType.RDMA, ()):
            held_vfs.update((pod.node_name, nic.minor, vf.minor) for vf in nic.vfs)
        if names.ANNOTATION_DEVICE_JOINT_ALLOCATE in pod.annotations and pod.node_name in devices:
            problems += _joint_problems(pod, allocated, devices[pod.node_name])
    problems += [
        f"node {n} NIC {nic} VF {vf} held by {count} pods" for (n, nic, vf), count in held_vfs.items() if count > 1
    ]
    return problems


def _request_problems(pod: Pod, allocated: Mapping[DeviceType, tuple[allocation.DeviceAllocation, ...]]) -> list[str]:
    problems = []
    for dtype, request in pod_device_requests(pod).items():
        got = allocated.get(dtype, ())
        if len(got) != request.count:
            problems.append(f"pod {pod.key} asked for {request.count} {dtype.value} devices, holds {len(got)}")
        for name, amount in request.per_device.items():
            if any(a.resources.get(name) != amount for a in got):
                problems.append(f"pod {pod.key} asked for {name}={amount} per {dtype.value}, holds {got}")
    if not pod_device_requests(pod) and allocated:
        problems.append(f"pod {pod.key} asked for no devices, holds {dict(allocated)}")
    return problems


def _joint_problems(
    pod: Pod, allocated: Mapping[DeviceType, tuple[allocation.DeviceAllocation, ...]], device: Device
) -> list[str]:
    """device-joint-allocate SamePCIe: every RDMA device sits on a PCIe switch of one of the GPUs."""

    def switch(dtype: DeviceType, minor: int) -> str:
        info = next(d for d in device.of_type(dtype) if d.minor == minor)
        return info.topology.pcie_id if info.topology else ""

    gpu_switches = {switch(DeviceType.GPU, a.minor) for a in allocated.get(DeviceType.GPU, ())}
    return [
        f"pod {pod.key}: RDMA {a.minor} is not on the PCIe switch of its GPUs {sorted(gpu_switches)}"
        for a in allocated.get(DeviceType.RDMA, ())
        if switch(DeviceType.RDMA, a.minor) not in gpu_switches
    ]


def _healthy(device: Device, dtype: DeviceType) -> list[DeviceInfo]:
    return [d for d in device.of_type(dtype) if d.health]


def allocatable_problems(nodes: Mapping[str, Node], devices: Mapping[str, Device]) -> list[str]:
    """Each Node offers exactly the healthy devices of its Device CR (docs/user/controller.md)."""
    problems = []
    for name, device in devices.items():
        node = nodes.get(name)
        if node is None:
            problems.append(f"Device {name} has no Node")
            continue
        gpus, nics = _healthy(device, DeviceType.GPU), _healthy(device, DeviceType.RDMA)
        want = {
            names.GPU_CORE: 100 * len(gpus),
            names.GPU_MEMORY_RATIO: 100 * len(gpus),
            names.KOORD_GPU: 100 * len(gpus),
            names.GPU_MEMORY: sum(g.resources.get(names.GPU_MEMORY, 0) for g in gpus),
            names.RDMA: 100 * len(nics),
        }
        want = {k: v for k, v in want.items() if v}
        have = {k: v for k, v in node.allocatable.items() if k in _MANAGED}
        if have != want:
            problems.append(f"node {name}: allocatable {have}, but its Device CR has {want}")
    return problems
