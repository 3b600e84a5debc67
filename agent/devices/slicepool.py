"""What to write so a pool's ResourceSlices on the API server become the wanted ones: kube's rules, pure.

The rules are those of kube's resourceslice controller (k8s.io/dynamic-resource-allocation,
`resourceslice.Controller.syncPool`), which kube's own drivers publish with, so a consumer of
slices sees a Tessera node as it sees any driver's:

- a pool's devices are split into slices of at most 128 devices (64 when any uses taints,
  counters or list attributes, kube's limit); `resourceSliceCount` is the number of slices;
- slices are named `<index>-<driver>-<node>-<random>` (`generateName`; the index in hex, at
  least 5 digits, so names sort in index order), owned by the Node (`controller: true`), so the
  garbage collector removes them with their Node;
- `generation` is the highest of the pool's slices on the server. A slice of a lower generation,
  of another pool, or whose name matches no wanted index is obsolete and deleted. The generation
  goes up by one when slices must be created, when more than one slice must change (consumers
  would otherwise see a mix of old and new slices), and — Tessera's addition — whenever the set
  of devices changes, so a consumer that cached the pool sees a new generation whenever a device
  came or went (a taint or an attribute changing in place keeps it: one atomic update);
- a taint's `timeAdded` the wanted device does not set is kept from the server's device
  (`copyTaintTimeAdded`), so a re-published taint does not look new.

`plan` is pure; agent/devices/slicewriter.py lists, plans and performs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from agent.devices.slices import Pool
from apis.dra.slice import (
    MAX_DEVICES,
    MAX_DEVICES_WITH_ADVANCED_FEATURES,
    Device,
    DeviceTaint,
    ResourcePool,
    ResourceSlice,
)
from apis.k8s.meta import ObjectMeta, OwnerReference

__all__ = ["INDEX_MIN_LENGTH", "Plan", "decode_index", "encode_index", "index_length", "node_owner", "plan", "split"]

#: kube's `resourceSliceIndexMinLength`.
INDEX_MIN_LENGTH = 5


@dataclass(frozen=True, slots=True)
class Plan:
    """In this order: delete `deletes`, replace `updates` (each with the server's metadata and
    resourceVersion), create `creates` (with generateName)."""

    generation: int
    deletes: tuple[ResourceSlice, ...] = ()
    updates: tuple[ResourceSlice, ...] = ()
    creates: tuple[ResourceSlice, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.deletes or self.updates or self.creates)


def node_owner(node_name: str, node_uid: str) -> tuple[OwnerReference, ...]:
    """The owner reference kube's drivers give their slices: the Node, as controller."""
    if not node_uid:
        return ()
    return (OwnerReference(api_version="v1", kind="Node", name=node_name, uid=node_uid, controller=True),)


def split(devices: Sequence[Device]) -> tuple[tuple[Device, ...], ...]:
    """The slices' devices: in order, at most kube's limit per slice; none without devices."""
    limit = MAX_DEVICES_WITH_ADVANCED_FEATURES if any(d.advanced for d in devices) else MAX_DEVICES
    return tuple(tuple(devices[i : i + limit]) for i in range(0, len(devices), limit))


def index_length(slices: int) -> int:
    return max(INDEX_MIN_LENGTH, len(f"{max(slices - 1, 0):x}"))


def encode_index(index: int, length: int) -> str:
    return f"{index:0{length}x}"


def decode_index(name: str, length: int) -> int | None:
    """The index a slice's name starts with, when it has exactly `length` hex digits; else None."""
    prefix, sep, _ = name.partition("-")
    if not sep or len(prefix) != length:
        return None
    try:
        return int(prefix, 16)
    except ValueError:
        return None


def plan(
    pool: Pool, existing: Sequence[ResourceSlice], *, node_name: str, owner: tuple[OwnerReference, ...] = ()
) -> Plan:
    """The writes that turn `existing` (the driver's slices with `spec.nodeName` = this node, as
    listed) into `pool`, published for `node_name` with owner references `owner`."""
    wanted = split(pool.devices)
    mine = [s for s in existing if s.pool.name == pool.name and s.driver == pool.driver]
    obsolete = [s for s in existing if s.pool.name != pool.name or s.driver != pool.driver]
    generation = max((s.pool.generation for s in mine), default=0)
    length = index_length(len(wanted))
    matched: dict[int, ResourceSlice] = {}
    for s in sorted(mine, key=lambda s: s.name):
        index = decode_index(s.name, length) if s.pool.generation >= generation else None
        if index is not None and index < len(wanted) and index not in matched:
            matched[index] = s
        else:
            obsolete.append(s)
    devices = {i: tuple(_keep_time_added(d, matched.get(i)) for d in wanted[i]) for i in range(len(wanted))}

    def pool_at(gen: int) -> ResourcePool:
        return ResourcePool(pool.name, gen, len(wanted))

    changed = {
        i
        for i, s in matched.items()
        if s.pool != pool_at(generation) or s.devices != devices[i] or s.meta.owner_references != owner
    }
    current_names = {d.name for s in mine if s.pool.generation == generation for d in s.devices}
    wanted_names = {d.name for d in pool.devices}
    if wanted and (len(matched) < len(wanted) or len(changed) > 1 or current_names != wanted_names):
        generation += 1
        changed = set(matched)
    updates = tuple(
        dataclasses.replace(
            matched[i],
            meta=dataclasses.replace(matched[i].meta, owner_references=owner),
            pool=pool_at(generation),
            devices=devices[i],
        )
        for i in sorted(changed)
    )
    creates = tuple(
        ResourceSlice(
            meta=ObjectMeta(
                generate_name=f"{encode_index(i, length)}-{pool.driver}-{node_name}-", owner_references=owner
            ),
            driver=pool.driver,
            pool=pool_at(generation),
            node_name=node_name,
            devices=devices[i],
        )
        for i in range(len(wanted))
        if i not in matched
    )
    return Plan(generation, tuple(sorted(obsolete, key=lambda s: s.name)), updates, creates)


def _keep_time_added(device: Device, current: ResourceSlice | None) -> Device:
    """`device` with the server's `timeAdded` on each taint it leaves without one."""
    if current is None or all(t.time_added for t in device.taints):
        return device
    before = next((d for d in current.devices if d.name == device.name), None)
    if before is None:
        return device

    def kept(taint: DeviceTaint) -> DeviceTaint:
        if taint.time_added:
            return taint
        same = next(
            (t for t in before.taints if (t.key, t.value, t.effect) == (taint.key, taint.value, taint.effect)), None
        )
        return taint if same is None else dataclasses.replace(taint, time_added=same.time_added)

    return dataclasses.replace(device, taints=tuple(kept(t) for t in device.taints))
