"""Devices of a Reservation for its owner: what the owner may take of them, by allocate policy.

Koordinator's DeviceShare (`tryAllocateFromReusable`) gives an owner the devices of the
Reservation it is placed onto as follows:

- `Aligned` (and the default): from the Reservation's devices first, the node's free devices
  for the rest. Tessera tries the Reservation's devices alone first (`within`); when they cannot
  hold the request, the node's free devices are added (the node without the Reservation).
- `Restricted`: of each device type the Reservation reserves, only its devices, and of each only
  what it has left (`within`); device types it does not reserve come from the node.

`within(node, held)` is the node (without the Reservation counted) on which, of every device type
the Reservation reserved, every other device and whatever of its own devices it does not have left
are held by a placeholder: the allocator then finds free exactly what the Reservation has left.
"""

from __future__ import annotations

from apis.crds.device import DeviceType
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.k8s.core import Pod
from apis.k8s.meta import ObjectMeta
from scheduler.cache import NodeInfo, PodInfo
from scheduler.cache.devices import vf_key
from scheduler.cache.reservations import HeldReservation

__all__ = ["within", "without"]


def without(node: NodeInfo, held: HeldReservation) -> NodeInfo:
    """`node` without what the Reservation has left counted (the runtime's view already is)."""
    return node.simulate(remove=(held.uid,)) if held.uid in node.pods else node


def within(node: NodeInfo, held: HeldReservation) -> NodeInfo:
    """`without(node, held)` where, of the device types the Reservation reserved, only what it has
    left is free (see the module docstring)."""
    base = without(node, held)
    blocks: dict[DeviceType, list[DeviceAllocation]] = {}
    for dtype in held.reserved:
        left = {a.minor: a for a in held.allocations.get(dtype, ())}
        for state in base.devices.states(dtype):
            keep = left.get(state.minor)
            amounts = {}
            for name in state.total:
                allowed = keep.resources.get(name, 0) if keep is not None else 0
                if state.free(name) > allowed:
                    amounts[name] = state.free(name) - allowed
            kept = {vf_key(v.bus_id, v.minor) for v in keep.vfs} if keep is not None else set()
            vfs = tuple(
                VFAllocation(vf.minor, vf.bus_id)
                for group in state.info.vf_groups
                for vf in group.vfs
                if vf_key(vf.bus_id, vf.minor) not in state.used_vfs and vf_key(vf.bus_id, vf.minor) not in kept
            )
            if amounts or vfs:
                blocks.setdefault(dtype, []).append(DeviceAllocation(state.minor, amounts, vfs=vfs))
    if not blocks:
        return base
    placeholder = Pod(meta=ObjectMeta(name=f"{held.name}-elsewhere", namespace="", uid=f"{held.uid}/elsewhere"))
    return base.simulate(add=(PodInfo(placeholder, {}, {t: tuple(a) for t, a in blocks.items()}),))
