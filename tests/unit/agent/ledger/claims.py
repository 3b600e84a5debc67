"""Factories for the device ledger's tests: a node's devices, pods' claims, GPU and RDMA shares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agent.ledger import Claim, GPUSlot, NodeSlots, RDMASlot
from apis.crds.device import DeviceType
from apis.extension import names
from apis.extension.allocation import DeviceAllocation, VFAllocation

GI = 2**30


NODE = "sim-1"


def make_node(
    *, gpus: int = 8, memory: int = 80 * GI, faults: Mapping[int, str] | None = None, rdma: int = 0
) -> NodeSlots:
    """`gpus` GPUs of `memory` bytes (minor i has UUID `GPU-i`), `faults` by minor, `rdma` PFs."""
    faults = faults or {}
    return NodeSlots(
        node=NODE,
        gpus={m: GPUSlot(m, f"GPU-{m}", memory, faults.get(m, "")) for m in range(gpus)},
        rdma={m: RDMASlot(m, f"0000:{0x3B + m:02x}:00.0") for m in range(rdma)},
    )


def share(minor: int, core: int | None = None, memory: int | None = None, ratio: int | None = None) -> DeviceAllocation:
    """A GPU allocation; with no amounts at all it is the whole GPU."""
    amounts = {names.GPU_CORE: core, names.GPU_MEMORY: memory, names.GPU_MEMORY_RATIO: ratio}
    return DeviceAllocation(minor, {k: v for k, v in amounts.items() if v is not None}, id=f"GPU-{minor}")


def nic(minor: int, *, rdma: int | None = None, vfs: Sequence[str] = ()) -> DeviceAllocation:
    """An RDMA allocation of PF `minor`, with VFs by PCI address."""
    return DeviceAllocation(
        minor,
        {names.RDMA: rdma} if rdma is not None else {},
        id=f"0000:{0x3B + minor:02x}:00.0",
        vfs=tuple(VFAllocation(i, bus) for i, bus in enumerate(vfs)),
    )


def claim(pod: str, *gpus: DeviceAllocation, rdma: Sequence[DeviceAllocation] = ()) -> Claim:
    """`pod` (`namespace/name`; its key is `uid-<name>`) holding or asking for these devices."""
    devices: dict[DeviceType, tuple[DeviceAllocation, ...]] = {}
    if gpus:
        devices[DeviceType.GPU] = tuple(gpus)
    if rdma:
        devices[DeviceType.RDMA] = tuple(rdma)
    return Claim(f"uid-{pod.rsplit('/', maxsplit=1)[-1]}", pod, devices)


def held(*claims: Claim) -> dict[str, Claim]:
    return {c.key: c for c in claims}
