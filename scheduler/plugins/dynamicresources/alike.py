"""Nodes alike for the allocator, so that one allocator run answers a claim shape for all of them
(as DeviceShare's `Signatures` do for Koordinator-protocol pods).

What the allocator, the device order (`ledger.rank`) and the node score read of a node, with
the node's identity left out, as a small id (`Signatures.of`): its slices' devices in the order
the allocator tries them (names, capacities, shared flags, counters, taints, the GPU `minor`;
not the other attributes), its pools (a pool named after the node counts as the node's pool),
what claims and Koordinator-protocol pods hold there, and its GPUs' use and PCIe switches.
Attributes are left out because they hold identities (a GPU's UUID); what a claim shape makes of
them is added per shape (`Signatures.shape`): which of the shape's CEL selectors select each
device (each evaluated once per device, `apis.dra.cel`), and the values of the attributes its
constraints compare. Two nodes with equal keys get the same answer from the allocator up to the
node's name (in its reasons) and pool names (in its results).

A node whose slices are not all its own (a slice of no node, or one selecting its nodes by
label or per device) has no signature: what it can reach depends on its name and labels, so it
shares nothing.

Pure but for its memory: reads a NodeInfo, the store's slices and holdings, and the compiler.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence

from apis.crds.device import DeviceType
from apis.dra import cel, gpus
from apis.dra.allocation import DeviceID
from apis.dra.claim import DeviceClass, ResourceClaim
from apis.dra.ledger import Held
from apis.dra.slice import Device, ResourceSlice
from scheduler.cache import NodeInfo
from scheduler.framework.ids import Ids
from scheduler.plugins.dynamicresources import ledger

__all__ = ["Signatures"]

_MAX_IDS = 1 << 16
_MAX_SLICES = 1 << 16
#: Stands for a pool named after the node in a signature.
_THE_NODE = "\0node"


class Signatures:
    """node -> small id of what the allocator reads of it, identities left out (module doc)."""

    __slots__ = ("_ids", "_selected", "_slices")

    def __init__(self) -> None:
        #: id(slice) -> (the slice, its key): the entry keeps the slice, so its id is not reused
        self._slices: dict[int, tuple[ResourceSlice, Hashable]] = {}
        #: (id(slice), selectors, constrained attributes) -> (the slice, what they make of its devices)
        self._selected: dict[tuple[int, tuple[str, ...], tuple[str, ...]], tuple[ResourceSlice, Hashable]] = {}
        self._ids = Ids(_MAX_IDS)

    def of(self, node: NodeInfo, slices: Sequence[ResourceSlice], held: Held) -> int | None:
        """The node's signature, None when it shares nothing; `slices` and `held` are what the
        allocator is given for the node. (The caller keeps it while they and the node's
        devices are unchanged.)"""
        ident = None
        if all(s.node_name == node.name and not s.per_device_node_selection for s in slices):
            key = (
                tuple(
                    self._slice_key(s, node.name) for s in sorted(slices, key=lambda s: (s.driver, s.pool.name, s.name))
                ),
                _held_key(held, node.name),
                tuple(sorted((m, tuple(sorted(r.items()))) for m, r in ledger.koordinator_gpus(node).items())),
                tuple(
                    (s.minor, s.pcie, tuple(sorted(s.used.items())), tuple(sorted(s.total.items())))
                    for s in node.devices.states(DeviceType.GPU)
                ),
            )
            ident = self._ids.of(key)
        return ident

    def shape(
        self,
        signature: int,
        claims: Sequence[ResourceClaim],
        slices: Sequence[ResourceSlice],
        classes: dict[str, DeviceClass],
        compiler: cel.Compiler,
    ) -> Hashable | None:
        """What the claims make of the node's devices beyond its signature: per device (in the
        signature's order), which of their selectors select it and the values of the attributes
        their constraints compare. None when that cannot be said without the allocator (a
        class missing, a selector that does not compile or fails on a device): the node then
        shares nothing for these claims."""
        expressions: list[str] = []
        constrained: list[str] = []
        for claim in claims:
            constrained.extend(c.match_attribute or c.distinct_attribute for c in claim.spec.constraints)
            for request in claim.spec.requests:
                for sub in request.alternatives:
                    klass = classes.get(sub.device_class_name)
                    if klass is None:
                        return None
                    expressions.extend(s.expression for s in (*klass.selectors, *sub.selectors))
        wanted, names = tuple(dict.fromkeys(expressions)), tuple(constrained)
        try:
            per_slice = tuple(
                self._selection(s, wanted, names, compiler)
                for s in sorted(slices, key=lambda s: (s.driver, s.pool.name, s.name))
            )
        except cel.CELError:
            return None
        return signature, per_slice

    def _selection(
        self, s: ResourceSlice, expressions: tuple[str, ...], names: tuple[str, ...], compiler: cel.Compiler
    ) -> Hashable:
        """Per device of the slice: which of the selectors select it, and the attributes'
        values (kept while the slice lives). Raises CELError."""
        key = (id(s), expressions, names)
        hit = self._selected.get(key)
        if hit is not None and hit[0] is s:
            return hit[1]
        programs = [compiler.compile(e) for e in expressions]
        found = tuple(
            (
                tuple(p.matches(device, s.driver) for p in programs),
                tuple(_attribute(device, n, s.driver) for n in names),
            )
            for device in s.devices
        )
        if len(self._selected) >= _MAX_SLICES:
            self._selected.clear()
        self._selected[key] = (s, found)
        return found

    def _slice_key(self, s: ResourceSlice, node: str) -> Hashable:
        hit = self._slices.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        key = (
            s.driver,
            _pool(s.pool.name, node),
            s.pool.generation,
            s.pool.resource_slice_count,
            json.dumps([c.to_dict() for c in s.shared_counters], sort_keys=True),
            tuple(_device_key(d) for d in s.devices),
        )
        if len(self._slices) >= _MAX_SLICES:
            self._slices.clear()
        self._slices[id(s)] = (s, key)
        return key


def _pool(name: str, node: str) -> str:
    return _THE_NODE if name == node else name


def _device_key(device: Device) -> Hashable:
    raw = device.to_dict()
    raw.pop("attributes", None)
    return json.dumps(raw, sort_keys=True), gpus.minor_of(device)


def _held_key(held: Held, node: str) -> Hashable:
    def rel(d: DeviceID) -> tuple[str, str, str]:
        return d.driver, _pool(d.pool, node), d.device

    return (
        tuple(sorted(rel(d) for d in held.exclusive)),
        tuple(sorted((rel(d), tuple(sorted(c.items()))) for d, c in held.capacity.items())),
    )


def _attribute(device: Device, name: str, driver: str) -> Hashable:
    attr = device.attribute(name, driver)
    return None if attr is None else (attr.type.value, attr.values, attr.is_list)
