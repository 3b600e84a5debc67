"""The collision check: may a pod have the devices its annotation names, given who holds what?

Pure: `collisions(claim, held, node)` takes plain data and returns plain data, so the hook plugin
(`agent.hooks.collision`) and the tests call the same function. The rules:

- **GPU**: on each GPU the `gpu-core` shares of every holder plus the claim add up to at most 100,
  and their `gpu-memory` to at most the GPU's total bytes (a share that gives only
  `gpu-memory-ratio` counts ratio × total / 100 bytes). An allocation that names no GPU resource at
  all is the whole GPU (100 % core, all memory), as the GPU env hook reads it; a whole GPU thus
  leaves nothing to anyone else.
- **RDMA**: on each physical function the `koordinator.sh/rdma` amounts add up to at most 100
  (an allocation without the resource is the whole device, or 1 per listed VF), and each virtual
  function (by PCI address, else by minor) has at most one holder.
- **Health**: a claim may not name an unhealthy device unless the same pod already holds it — a
  running pod keeps running on a GPU that failed under it; only new pods are kept off it.
- **Unknown devices**: a claim may not name a minor this node does not have.

A pod never collides with itself: its own entry in `held` (an earlier container of the same pod,
or the pod as the informer saw it) is left out of the sums. Collisions come in claim order,
holders by name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from agent.ledger.model import Claim, Collision, CollisionKind, NodeSlots
from apis.crds.device import DeviceType
from apis.extension import devicetypes, names
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.k8s import resources

__all__ = ["collisions"]

_WHOLE: Final = 100  # percent of one device
#: What one GPU offers (the device type table): an allocation that names none of it is the whole GPU.
_GPU_RESOURCES: Final = devicetypes.spec(DeviceType.GPU).capacity


def collisions(claim: Claim, held: Mapping[str, Claim], node: NodeSlots) -> tuple[Collision, ...]:
    """Every reason `claim` cannot be admitted beside `held` (pod key -> claim) on `node`; empty
    when it can. Never raises for odd input: a device the node lacks is a collision, not an error."""
    own = held.get(claim.key)
    others = sorted((c for key, c in held.items() if key != claim.key), key=lambda c: (c.pod, c.key))
    found: list[Collision] = []
    for alloc in claim.devices.get(DeviceType.GPU, ()):
        found.extend(_gpu(claim, alloc, others, own, node))
    for alloc in claim.devices.get(DeviceType.RDMA, ()):
        found.extend(_rdma(claim, alloc, others, own, node))
    return tuple(found)


# --- GPUs ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _GPUShare:
    core: int  # percent
    memory: int  # bytes

    def __str__(self) -> str:
        return f"{self.core}% core, {_bytes(self.memory)}"


def _gpu_share(alloc: DeviceAllocation, total_memory: int) -> _GPUShare:
    res = alloc.resources
    if not any(name in res for name in _GPU_RESOURCES):
        return _GPUShare(_WHOLE, total_memory)
    memory = res.get(names.GPU_MEMORY)
    if memory is None:
        memory = res.get(names.GPU_MEMORY_RATIO, 0) * total_memory // _WHOLE
    return _GPUShare(res.get(names.GPU_CORE, 0), memory)


def _gpu(
    claim: Claim, alloc: DeviceAllocation, others: Sequence[Claim], own: Claim | None, node: NodeSlots
) -> Iterator[Collision]:
    slot = node.gpus.get(alloc.minor)
    if slot is None:
        yield _unknown(DeviceType.GPU, alloc.minor, node, sorted(node.gpus))
        return
    asked = _gpu_share(alloc, slot.memory_bytes)
    place = _Place(DeviceType.GPU, slot.minor, f"GPU {slot.minor} ({slot.uuid}) of node {node.node}")
    if not slot.healthy and not _holds(own, place):
        yield _unhealthy(place, slot.fault, claim, asked)
    holders = [(c.pod, _gpu_share(a, slot.memory_bytes)) for c, a in _on(others, place)]
    core = sum(share.core for _, share in holders)
    memory = sum(share.memory for _, share in holders)
    if core + asked.core <= _WHOLE and memory + asked.memory <= slot.memory_bytes:
        return
    free = _GPUShare(max(0, _WHOLE - core), max(0, slot.memory_bytes - memory))
    total = _GPUShare(_WHOLE, slot.memory_bytes)
    yield _overcommitted(place, claim, holders, asked=asked, free=free, total=total)


# --- RDMA ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _RDMAShare:
    amount: int  # percent of the physical function; 1 per VF

    def __str__(self) -> str:
        return f"rdma {self.amount}"


def _rdma_share(alloc: DeviceAllocation) -> _RDMAShare:
    default = len(alloc.vfs) if alloc.vfs else _WHOLE
    return _RDMAShare(alloc.resources.get(names.RDMA, default))


def _rdma(
    claim: Claim, alloc: DeviceAllocation, others: Sequence[Claim], own: Claim | None, node: NodeSlots
) -> Iterator[Collision]:
    slot = node.rdma.get(alloc.minor)
    if slot is None:
        yield _unknown(DeviceType.RDMA, alloc.minor, node, sorted(node.rdma))
        return
    asked = _rdma_share(alloc)
    place = _Place(DeviceType.RDMA, slot.minor, f"RDMA {slot.minor} ({slot.bus_id}) of node {node.node}")
    if not slot.healthy and not _holds(own, place):
        yield _unhealthy(place, slot.fault, claim, asked)
    on_device = _on(others, place)
    holders = [(c.pod, _rdma_share(a)) for c, a in on_device]
    used = sum(share.amount for _, share in holders)
    if used + asked.amount > _WHOLE:
        free = _RDMAShare(max(0, _WHOLE - used))
        yield _overcommitted(place, claim, holders, asked=asked, free=free, total=_RDMAShare(_WHOLE))
    vf_holders = {_vf_key(vf): c.pod for c, a in on_device for vf in a.vfs}
    for vf in alloc.vfs:
        holder = vf_holders.get(_vf_key(vf))
        if holder is not None:
            yield Collision(
                CollisionKind.VF_TAKEN,
                DeviceType.RDMA,
                slot.minor,
                (holder,),
                f"{place.where}: VF {_vf_key(vf)} is already held by {holder}: {claim.pod} asks for it too",
            )


def _vf_key(vf: VFAllocation) -> str:
    return vf.bus_id or f"minor {vf.minor}"


# --- shared --------------------------------------------------------------------------------------
_Share = _GPUShare | _RDMAShare


@dataclass(frozen=True, slots=True)
class _Place:
    """One device of the node, and how messages name it (`GPU 0 (GPU-…) of node sim-1`)."""

    type: DeviceType
    minor: int
    where: str


def _on(claims: Sequence[Claim], place: _Place) -> list[tuple[Claim, DeviceAllocation]]:
    """(holder, its allocation) for every holder of the device at `place`."""
    return [(c, a) for c in claims for a in c.devices.get(place.type, ()) if a.minor == place.minor]


def _holds(claim: Claim | None, place: _Place) -> bool:
    return claim is not None and any(a.minor == place.minor for a in claim.devices.get(place.type, ()))


def _overcommitted(
    place: _Place, claim: Claim, holders: Sequence[tuple[str, _Share]], *, asked: _Share, free: _Share, total: _Share
) -> Collision:
    if holders:
        held = ", ".join(f"{pod} ({share})" for pod, share in holders)
        message = f"{place.where} is already held by {held}: {claim.pod} asks for {asked}, {free} free"
    else:
        message = f"{place.where} has {total}: {claim.pod} asks for {asked}"
    pods = tuple(sorted({pod for pod, _ in holders}))
    return Collision(CollisionKind.OVERCOMMITTED, place.type, place.minor, pods, message)


def _unhealthy(place: _Place, fault: str, claim: Claim, asked: _Share) -> Collision:
    return Collision(
        CollisionKind.UNHEALTHY,
        place.type,
        place.minor,
        (),
        f"{place.where} is unhealthy ({fault}): no new pod may start on it, only pods that held it "
        f"before the fault keep running; {claim.pod} asks for {asked}",
    )


def _unknown(dtype: DeviceType, minor: int, node: NodeSlots, minors: Sequence[int]) -> Collision:
    label = "GPU" if dtype is DeviceType.GPU else "RDMA device"
    has = f"its {label}s: {', '.join(map(str, minors))}" if minors else f"it has no {label}s"
    message = f"{label} {minor} is not on node {node.node} ({has})"
    return Collision(CollisionKind.UNKNOWN_DEVICE, dtype, minor, (), message)


def _bytes(amount: int) -> str:
    return resources.format_quantity(names.GPU_MEMORY, amount)
