"""ResourceSlice (`resource.k8s.io/v1`): the devices a driver offers, parsed once.

A driver publishes its devices in pools; a pool may span several slices (`pool.resourceSliceCount`)
and is replaced whole by raising `pool.generation`. Each device has attributes (typed values a CEL
selector reads), capacity (quantities, consumable when the device allows multiple allocations,
under an optional request policy), counters it consumes from the pool's shared counter sets
(partitionable devices: the partitions of one GPU draw on the same memory and slices), taints, and
where it is reachable (the slice's node, node selector or all nodes; or, with
`perDeviceNodeSelection`, the device's own).

Field names follow k8s.io/api/resource/v1 exactly (types.go). `from_dict` reports the first bad
field by its path and never raises anything but ValidationError; the allocator
(scheduler.plugins.dynamicresources.allocator) reads only these values.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis import _fields as f
from apis.dra import _read as r
from apis.errors import ValidationError
from apis.k8s.core import NodeSelectorTerm
from apis.k8s.meta import ObjectMeta
from apis.k8s.quantity import Quantity

__all__ = [
    "MAX_DEVICES",
    "MAX_DEVICES_WITH_ADVANCED_FEATURES",
    "AttributeType",
    "CapacityRequestPolicy",
    "CounterSet",
    "Device",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceCounterConsumption",
    "DeviceTaint",
    "NodeSelector",
    "ResourcePool",
    "ResourceSlice",
    "TaintEffect",
]

#: kube's limits on a slice's devices: 128, or 64 when any uses taints, counters or list attributes.
MAX_DEVICES: Final = 128
MAX_DEVICES_WITH_ADVANCED_FEATURES: Final = 64

#: Semantic Versioning 2.0.0 (semver.org), what kube's `version` attributes must hold.
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


class AttributeType(enum.Enum):
    INT = "int"
    BOOL = "bool"
    STRING = "string"
    VERSION = "version"


_LIST_KEYS = {"ints": AttributeType.INT, "bools": AttributeType.BOOL, "strings": AttributeType.STRING}
_LIST_KEYS["versions"] = AttributeType.VERSION


@dataclass(frozen=True, slots=True)
class DeviceAttribute:
    """One typed value (`int`, `bool`, `string`, `version`) or a list of one type (`ints`, ...)."""

    type: AttributeType
    values: tuple[int | bool | str, ...]
    is_list: bool = False

    @property
    def value(self) -> int | bool | str:
        """The scalar value (the first, for a list)."""
        return self.values[0]

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> DeviceAttribute:
        d = f.mapping(raw, path, obj)
        found = [k for k in ("int", "bool", "string", "version", *_LIST_KEYS) if d.get(k) is not None]
        if len(found) != 1:
            raise ValidationError(
                path, f"exactly one of int, bool, string, version (or a list) must be set, got {found}", obj=obj
            )
        key = found[0]
        if key in _LIST_KEYS:
            atype = _LIST_KEYS[key]
            items = f.items(d, key, path, obj)
            values = tuple(_attribute_value(atype, v, f"{path}.{key}[{i}]", obj) for i, v in enumerate(items))
            return cls(atype, values, is_list=True)
        atype = AttributeType(key)
        return cls(atype, (_attribute_value(atype, d[key], f"{path}.{key}", obj),))

    def to_dict(self) -> dict[str, Any]:
        if self.is_list:
            key = next(k for k, t in _LIST_KEYS.items() if t is self.type)
            return {key: list(self.values)}
        return {self.type.value: self.value}


def _attribute_value(atype: AttributeType, value: object, path: str, obj: str) -> int | bool | str:
    if atype is AttributeType.BOOL:
        if not isinstance(value, bool):
            raise ValidationError(path, f"expected a boolean, got {value!r}", obj=obj)
        return value
    if atype is AttributeType.INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(path, f"expected an integer, got {value!r}", obj=obj)
        return value
    if not isinstance(value, str):
        raise ValidationError(path, f"expected a string, got {value!r}", obj=obj)
    if atype is AttributeType.VERSION and not _SEMVER.match(value):
        raise ValidationError(path, f"{value!r} is not a semantic version (semver.org 2.0.0)", obj=obj)
    return value


@dataclass(frozen=True, slots=True)
class CapacityRequestPolicy:
    """How a request consumes one capacity: `default`, and `validValues` or `validRange`."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    valid_range_min: Quantity | None = None
    valid_range_max: Quantity | None = None
    valid_range_step: Quantity | None = None

    @property
    def has_range(self) -> bool:
        return self.valid_range_min is not None

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> CapacityRequestPolicy:
        d = f.mapping(raw, path, obj)
        values = tuple(
            r.qty(v, f"{path}.validValues[{i}]", obj) for i, v in enumerate(f.items(d, "validValues", path, obj))
        )
        if list(values) != sorted(values) or len(set(values)) != len(values):
            raise ValidationError(f"{path}.validValues", "must be sorted in ascending order without repeats", obj=obj)
        rng = d.get("validRange")
        rmin = rmax = rstep = None
        if rng is not None:
            rpath = f"{path}.validRange"
            rd = f.mapping(rng, rpath, obj)
            rmin = r.optional_qty(rd, "min", rpath, obj)
            if rmin is None:
                raise ValidationError(f"{rpath}.min", "required", obj=obj)
            rmax = r.optional_qty(rd, "max", rpath, obj)
            rstep = r.optional_qty(rd, "step", rpath, obj)
            if rstep is not None and rstep.amount <= 0:
                raise ValidationError(f"{rpath}.step", f"must be positive, got {rstep}", obj=obj)
        if values and rng is not None:
            raise ValidationError(path, "at most one of validValues and validRange may be set", obj=obj)
        return cls(r.optional_qty(d, "default", path, obj), values, rmin, rmax, rstep)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.default is not None:
            out["default"] = str(self.default)
        if self.valid_values:
            out["validValues"] = [str(v) for v in self.valid_values]
        if self.valid_range_min is not None:
            rng = {"min": str(self.valid_range_min)}
            if self.valid_range_max is not None:
                rng["max"] = str(self.valid_range_max)
            if self.valid_range_step is not None:
                rng["step"] = str(self.valid_range_step)
            out["validRange"] = rng
        return out


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    value: Quantity
    request_policy: CapacityRequestPolicy | None = None

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> DeviceCapacity:
        d = f.mapping(raw, path, obj)
        if d.get("value") is None:
            raise ValidationError(f"{path}.value", "required", obj=obj)
        policy = d.get("requestPolicy")
        return cls(
            r.qty(d["value"], f"{path}.value", obj),
            None if policy is None else CapacityRequestPolicy.from_dict(policy, f"{path}.requestPolicy", obj),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": str(self.value)}
        if self.request_policy is not None:
            out["requestPolicy"] = self.request_policy.to_dict()
        return out


def _counters(d: f.JSON, path: str, obj: str) -> dict[str, Quantity]:
    """`counters: {name: {value: <quantity>}}`."""
    raw = f.mapping(d.get("counters"), f"{path}.counters", obj)
    out: dict[str, Quantity] = {}
    for name in sorted(raw):
        cpath = f"{path}.counters.{name}"
        cd = f.mapping(raw[name], cpath, obj)
        if cd.get("value") is None:
            raise ValidationError(f"{cpath}.value", "required", obj=obj)
        out[name] = r.qty(cd["value"], f"{cpath}.value", obj)
    return out


def _counters_dict(counters: Mapping[str, Quantity]) -> dict[str, Any]:
    return {name: {"value": str(counters[name])} for name in sorted(counters)}


@dataclass(frozen=True, slots=True)
class CounterSet:
    """A pool's shared counters (`sharedCounters[]`): what partitions of one device draw on."""

    name: str
    counters: Mapping[str, Quantity] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> CounterSet:
        d = f.mapping(raw, path, obj)
        return cls(r.required_string(d, "name", path, obj), _counters(d, path, obj))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "counters": _counters_dict(self.counters)}


@dataclass(frozen=True, slots=True)
class DeviceCounterConsumption:
    counter_set: str
    counters: Mapping[str, Quantity] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> DeviceCounterConsumption:
        d = f.mapping(raw, path, obj)
        return cls(r.required_string(d, "counterSet", path, obj), _counters(d, path, obj))

    def to_dict(self) -> dict[str, Any]:
        return {"counterSet": self.counter_set, "counters": _counters_dict(self.counters)}


class TaintEffect(enum.Enum):
    NONE = "None"
    NO_SCHEDULE = "NoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    effect: str  # a TaintEffect's value; kept as written, so an effect from a newer API is not lost
    value: str = ""
    time_added: str = ""

    @property
    def prevents_allocation(self) -> bool:
        """Only the known effects that keep devices from new claims do (kube ignores the rest)."""
        return self.effect in (TaintEffect.NO_SCHEDULE.value, TaintEffect.NO_EXECUTE.value)

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> DeviceTaint:
        d = f.mapping(raw, path, obj)
        return cls(
            key=r.required_string(d, "key", path, obj),
            effect=r.required_string(d, "effect", path, obj),
            value=f.string(d, "value", path, obj),
            time_added=f.string(d, "timeAdded", path, obj),
        )

    def to_dict(self) -> dict[str, Any]:
        return f.drop_empty({"key": self.key, "value": self.value, "effect": self.effect, "timeAdded": self.time_added})

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """A core/v1 NodeSelector: terms ORed. Kept with its JSON, which an allocation result repeats."""

    terms: tuple[NodeSelectorTerm, ...]
    raw: Mapping[str, Any]

    def matches(self, node_labels: Mapping[str, str], node_name: str) -> bool:
        return any(t.matches(node_labels, node_name) for t in self.terms)

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> NodeSelector:
        d = f.mapping(raw, path, obj)
        terms = tuple(
            NodeSelectorTerm.from_dict(t, f"{path}.nodeSelectorTerms[{i}]", obj)
            for i, t in enumerate(f.items(d, "nodeSelectorTerms", path, obj))
        )
        return cls(terms, dict(d))


def _where(d: f.JSON, path: str, obj: str) -> tuple[str, NodeSelector | None, bool]:
    """`nodeName`, `nodeSelector`, `allNodes`: at most one may be set."""
    node_name = f.string(d, "nodeName", path, obj)
    raw_selector = d.get("nodeSelector")
    selector = None if raw_selector is None else NodeSelector.from_dict(raw_selector, f"{path}.nodeSelector", obj)
    all_nodes = f.boolean(d, "allNodes", path, obj)
    if sum((bool(node_name), selector is not None, all_nodes)) > 1:
        raise ValidationError(path, "at most one of nodeName, nodeSelector and allNodes may be set", obj=obj)
    return node_name, selector, all_nodes


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    attributes: Mapping[str, DeviceAttribute] = field(default_factory=dict)
    capacity: Mapping[str, DeviceCapacity] = field(default_factory=dict)
    consumes_counters: tuple[DeviceCounterConsumption, ...] = ()
    node_name: str = ""
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool = False

    @property
    def advanced(self) -> bool:
        """Uses taints, counters or list attributes: a slice holds fewer such devices."""
        return bool(self.taints or self.consumes_counters or any(a.is_list for a in self.attributes.values()))

    def attribute(self, name: str, driver: str) -> DeviceAttribute | None:
        """A fully qualified attribute `domain/id`, also found unqualified when domain is the
        driver (kube's lookupAttribute: a driver's own attributes may be written without it)."""
        if name in self.attributes:
            return self.attributes[name]
        domain, _, ident = name.partition("/")
        return self.attributes.get(ident) if domain == driver else None

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> Device:
        d = f.mapping(raw, path, obj)
        attrs_raw = f.mapping(d.get("attributes"), f"{path}.attributes", obj)
        attributes = {
            r.qualified_name(k, f"{path}.attributes", obj): DeviceAttribute.from_dict(
                attrs_raw[k], f"{path}.attributes.{k}", obj
            )
            for k in sorted(attrs_raw)
        }
        cap_raw = f.mapping(d.get("capacity"), f"{path}.capacity", obj)
        capacity = {
            r.qualified_name(k, f"{path}.capacity", obj): DeviceCapacity.from_dict(
                cap_raw[k], f"{path}.capacity.{k}", obj
            )
            for k in sorted(cap_raw)
        }
        consumes = tuple(
            DeviceCounterConsumption.from_dict(c, f"{path}.consumesCounters[{i}]", obj)
            for i, c in enumerate(f.items(d, "consumesCounters", path, obj))
        )
        if len({c.counter_set for c in consumes}) != len(consumes):
            raise ValidationError(f"{path}.consumesCounters", "one entry per counterSet", obj=obj)
        node_name, selector, all_nodes = _where(d, path, obj)
        return cls(
            name=r.required_string(d, "name", path, obj),
            attributes=attributes,
            capacity=capacity,
            consumes_counters=consumes,
            node_name=node_name,
            node_selector=selector,
            all_nodes=all_nodes,
            taints=tuple(
                DeviceTaint.from_dict(t, f"{path}.taints[{i}]", obj)
                for i, t in enumerate(f.items(d, "taints", path, obj))
            ),
            binds_to_node=f.boolean(d, "bindsToNode", path, obj),
            binding_conditions=f.strings(d, "bindingConditions", path, obj),
            binding_failure_conditions=f.strings(d, "bindingFailureConditions", path, obj),
            allow_multiple_allocations=f.boolean(d, "allowMultipleAllocations", path, obj),
        )

    def to_dict(self) -> dict[str, Any]:
        return f.drop_empty(
            {
                "name": self.name,
                "attributes": {k: self.attributes[k].to_dict() for k in sorted(self.attributes)},
                "capacity": {k: self.capacity[k].to_dict() for k in sorted(self.capacity)},
                "consumesCounters": [c.to_dict() for c in self.consumes_counters],
                "nodeName": self.node_name,
                "nodeSelector": None if self.node_selector is None else dict(self.node_selector.raw),
                "allNodes": self.all_nodes or None,
                "taints": [t.to_dict() for t in self.taints],
                "bindsToNode": self.binds_to_node or None,
                "bindingConditions": list(self.binding_conditions),
                "bindingFailureConditions": list(self.binding_failure_conditions),
                "allowMultipleAllocations": self.allow_multiple_allocations or None,
            }
        )


@dataclass(frozen=True, slots=True)
class ResourcePool:
    name: str
    generation: int = 0
    resource_slice_count: int = 1


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    meta: ObjectMeta
    driver: str
    pool: ResourcePool
    node_name: str = ""
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    devices: tuple[Device, ...] = ()
    per_device_node_selection: bool = False
    shared_counters: tuple[CounterSet, ...] = ()

    @property
    def name(self) -> str:
        return self.meta.name

    @classmethod
    def from_dict(cls, raw: object) -> ResourceSlice:
        d = f.mapping(raw, "resourceslice")
        meta = ObjectMeta.from_dict(d.get("metadata"))
        obj = f"resourceslice {meta.name}"
        spec = f.mapping(d.get("spec"), "spec", obj)
        pool_d = f.mapping(spec.get("pool"), "spec.pool", obj)
        pool = ResourcePool(
            name=r.required_string(pool_d, "name", "spec.pool", obj),
            generation=f.integer(pool_d, "generation", "spec.pool", obj, 0) or 0,
            resource_slice_count=f.integer(pool_d, "resourceSliceCount", "spec.pool", obj, 1) or 0,
        )
        if pool.resource_slice_count < 1:
            raise ValidationError("spec.pool.resourceSliceCount", "must be at least 1", obj=obj)
        node_name, selector, all_nodes = _where(spec, "spec", obj)
        per_device = f.boolean(spec, "perDeviceNodeSelection", "spec", obj)
        counters = tuple(
            CounterSet.from_dict(c, f"spec.sharedCounters[{i}]", obj)
            for i, c in enumerate(f.items(spec, "sharedCounters", "spec", obj))
        )
        devices = tuple(
            Device.from_dict(dv, f"spec.devices[{i}]", obj)
            for i, dv in enumerate(f.items(spec, "devices", "spec", obj))
        )
        if not counters and sum((bool(node_name), selector is not None, all_nodes, per_device)) != 1:
            raise ValidationError(
                "spec",
                "exactly one of nodeName, nodeSelector, allNodes and perDeviceNodeSelection must be set",
                obj=obj,
            )
        for i, dv in enumerate(devices):
            if not per_device and (dv.node_name or dv.node_selector is not None or dv.all_nodes):
                raise ValidationError(
                    f"spec.devices[{i}]", "nodeName/nodeSelector/allNodes need perDeviceNodeSelection", obj=obj
                )
        return cls(
            meta=meta,
            driver=r.required_string(spec, "driver", "spec", obj),
            pool=pool,
            node_name=node_name,
            node_selector=selector,
            all_nodes=all_nodes,
            devices=devices,
            per_device_node_selection=per_device,
            shared_counters=counters,
        )

    def to_dict(self) -> dict[str, Any]:
        spec = f.drop_empty(
            {
                "driver": self.driver,
                "pool": {
                    "name": self.pool.name,
                    "generation": self.pool.generation,
                    "resourceSliceCount": self.pool.resource_slice_count,
                },
                "nodeName": self.node_name,
                "nodeSelector": None if self.node_selector is None else dict(self.node_selector.raw),
                "allNodes": self.all_nodes or None,
                "perDeviceNodeSelection": self.per_device_node_selection or None,
                "devices": [dv.to_dict() for dv in self.devices],
                "sharedCounters": [c.to_dict() for c in self.shared_counters],
            }
        )
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": self.meta.to_dict(),
            "spec": spec,
        }
