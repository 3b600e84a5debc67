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

A Reservation placed over running pods (pre-allocation) is given their devices first the same
way (`over`: the node without those pods, where of each device type they hold only what they
hold is free), so that their devices and the Reservation's are one holding; when theirs cannot
hold its request, it is given devices of the node without them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from apis.crds.device import DeviceType
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.k8s.core import Pod
from apis.k8s.meta import ObjectMeta
from scheduler.cache import NodeInfo, PodInfo
from scheduler.cache.devices import vf_key
from scheduler.cache.reservations import HeldReservation

__all__ = ["over", "within", "without"]


def without(node: NodeInfo, held: HeldReservation) -> NodeInfo:
    """`node` without what the Reservation has left counted (the runtime's view already is)."""
    return node.simulate(remove=(held.uid,)) if held.uid in node.pods else node


def within(node: NodeInfo, held: HeldReservation) -> NodeInfo:
    """`without(node, held)` where, of the device types the Reservation reserved, only what it has
    left is free (see the module docstring)."""
    return _only(without(node, held), held.reserved, held.allocations, held.name, held.uid)


def over(node: NodeInfo, pods: Sequence[PodInfo]) -> NodeInfo:
    """`node` without the running `pods`, where of the device types they hold only their devices
    are free (see the module docstring)."""
    base = node.simulate(remove=[p.ident for p in pods if p.ident in node.pods])
    held: dict[DeviceType, dict[int, DeviceAllocation]] = {}
    for pod in pods:
        for dtype, allocs in pod.allocations.items():
            into = held.setdefault(dtype, {})
            for alloc in allocs:
                had = into.get(alloc.minor)
                if had is None:
                    into[alloc.minor] = alloc
                    continue
                both = {*had.resources, *alloc.resources}
                amounts = {n: had.resources.get(n, 0) + alloc.resources.get(n, 0) for n in both}
                into[alloc.minor] = DeviceAllocation(alloc.minor, amounts, had.id, had.vfs + alloc.vfs)
    theirs = {dtype: tuple(by_minor.values()) for dtype, by_minor in held.items()}
    name = pods[0].key if pods else ""
    return _only(base, theirs, theirs, name, "/".join(p.ident for p in pods))


def _only(
    base: NodeInfo,
    types: Iterable[DeviceType],
    left: Mapping[DeviceType, Iterable[DeviceAllocation]],
    owner: str,
    uid: str,
) -> NodeInfo:
    """`base` where, of the device `types`, only what `left` names is free: a placeholder holds
    every other device and the rest of those."""
    blocks: dict[DeviceType, list[DeviceAllocation]] = {}
    for dtype in types:
        left_of = {a.minor: a for a in left.get(dtype, ())}
        for state in base.devices.states(dtype):
            keep = left_of.get(state.minor)
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
    placeholder = Pod(meta=ObjectMeta(name=f"{owner}-elsewhere", namespace="", uid=f"{uid}/elsewhere"))
    return base.simulate(add=(PodInfo(placeholder, {}, {t: tuple(a) for t, a in blocks.items()}),))
