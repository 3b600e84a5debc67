"""DeviceClass and ResourceClaim (`resource.k8s.io/v1`): what a pod asks for, parsed once.

A claim's `spec.devices.requests[]` each ask either `exactly` (one device class, CEL selectors,
`allocationMode` ExactCount with `count` or All, `adminAccess`, `tolerations`, `capacity.requests`)
or `firstAvailable` (a prioritized list of sub-requests, the first that can be satisfied wins);
`constraints[]` (`matchAttribute`, `distinctAttribute`) tie the devices of several requests
together; `config[]` is opaque driver configuration passed on in the allocation result. A
DeviceClass adds its own selectors and configuration to every request naming it.

Field names follow k8s.io/api/resource/v1 exactly. Defaults are kube's: allocationMode ExactCount,
count 1, toleration operator Equal. `from_dict` reports the first bad field by its path
(ValidationError); nothing here evaluates CEL (apis.dra.cel does, once per expression).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis import _fields as f
from apis.dra import _read as r
from apis.dra.allocation import AllocationResult, ConsumerReference
from apis.dra.slice import DeviceTaint
from apis.errors import ValidationError
from apis.k8s.core import Taint, Toleration
from apis.k8s.meta import ObjectMeta
from apis.k8s.quantity import Quantity

__all__ = [
    "AllocationMode",
    "DeviceClaimConfiguration",
    "DeviceClass",
    "DeviceConfiguration",
    "DeviceConstraint",
    "DeviceRequest",
    "DeviceSubRequest",
    "DeviceToleration",
    "ExactDeviceRequest",
    "ResourceClaim",
    "ResourceClaimSpec",
    "Selector",
]

#: kube's limits (types.go): a request's results, firstAvailable entries, selector length.
ALLOCATION_RESULTS_MAX_SIZE = 32
FIRST_AVAILABLE_MAX_SIZE = 8
CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024


class AllocationMode(enum.Enum):
    EXACT_COUNT = "ExactCount"
    ALL = "All"


@dataclass(frozen=True, slots=True)
class Selector:
    """A `selectors[]` entry: a CEL expression over the `device` variable."""

    expression: str

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> Selector:
        d = f.mapping(raw, path, obj)
        cel = d.get("cel")
        if cel is None:
            raise ValidationError(f"{path}.cel", "required (the only selector type)", obj=obj)
        expression = r.required_string(f.mapping(cel, f"{path}.cel", obj), "expression", f"{path}.cel", obj)
        if len(expression) > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
            raise ValidationError(
                f"{path}.cel.expression",
                f"{len(expression)} characters, more than the {CEL_SELECTOR_EXPRESSION_MAX_LENGTH} allowed",
                obj=obj,
            )
        return cls(expression)

    def to_dict(self) -> dict[str, Any]:
        return {"cel": {"expression": self.expression}}


def _selectors(d: f.JSON, path: str, obj: str) -> tuple[Selector, ...]:
    return tuple(
        Selector.from_dict(s, f"{path}.selectors[{i}]", obj) for i, s in enumerate(f.items(d, "selectors", path, obj))
    )


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty tolerates every effect
    toleration_seconds: int | None = None

    def tolerates(self, taint: DeviceTaint) -> bool:
        """kube's resourceclaim.ToleratesTaint, which is the same rule as a pod's for a node's taint
        (key: empty with Exists matches any; effect: empty matches any; Exists, or Equal value)."""
        toleration = Toleration(self.key, self.operator, self.value, self.effect)
        return toleration.tolerates(Taint(taint.key, taint.value, taint.effect))

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> DeviceToleration:
        d = f.mapping(raw, path, obj)
        operator = r.choice(d, "operator", path, obj, allowed=("Equal", "Exists"), default="Equal")
        key = f.string(d, "key", path, obj)
        value = f.string(d, "value", path, obj)
        if not key and operator != "Exists":
            raise ValidationError(f"{path}.operator", "must be Exists when key is empty", obj=obj)
        if operator == "Exists" and value:
            raise ValidationError(f"{path}.value", "must be empty when operator is Exists", obj=obj)
        return cls(key, operator, value, f.string(d, "effect", path, obj), f.integer(d, "tolerationSeconds", path, obj))

    def to_dict(self) -> dict[str, Any]:
        out = f.drop_empty({"key": self.key, "operator": self.operator, "value": self.value, "effect": self.effect})
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


def _tolerations(d: f.JSON, path: str, obj: str) -> tuple[DeviceToleration, ...]:
    return tuple(
        DeviceToleration.from_dict(t, f"{path}.tolerations[{i}]", obj)
        for i, t in enumerate(f.items(d, "tolerations", path, obj))
    )


def _capacity_requests(d: f.JSON, path: str, obj: str) -> dict[str, Quantity]:
    raw = d.get("capacity")
    if raw is None:
        return {}
    return r.qty_map(f.mapping(raw, f"{path}.capacity", obj), "requests", f"{path}.capacity", obj)


def _mode_and_count(d: f.JSON, path: str, obj: str) -> tuple[AllocationMode, int]:
    mode = AllocationMode(r.choice(d, "allocationMode", path, obj, allowed=("ExactCount", "All"), default="ExactCount"))
    count = f.integer(d, "count", path, obj)
    if mode is AllocationMode.ALL:
        if count:
            raise ValidationError(f"{path}.count", "must not be set with allocationMode All", obj=obj)
        return mode, 0
    count = 1 if count is None else count
    if count < 1:
        raise ValidationError(f"{path}.count", f"must be at least 1, got {count}", obj=obj)
    return mode, count


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    """One way to satisfy a request: `exactly`'s fields, or one `firstAvailable[]` entry.

    `name` is the request's name for `exactly`, the sub-request's for `firstAvailable`;
    admin access is for `exactly` only (kube's API has no field for it in a sub-request).
    """

    name: str
    device_class_name: str
    selectors: tuple[Selector, ...] = ()
    allocation_mode: AllocationMode = AllocationMode.EXACT_COUNT
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: Mapping[str, Quantity] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "", *, name: str | None = None) -> DeviceSubRequest:
        d = f.mapping(raw, path, obj)
        mode, count = _mode_and_count(d, path, obj)
        admin = d.get("adminAccess")
        if name is None and admin is not None:
            raise ValidationError(f"{path}.adminAccess", "not allowed in a firstAvailable sub-request", obj=obj)
        return cls(
            name=name if name is not None else r.required_string(d, "name", path, obj),
            device_class_name=r.required_string(d, "deviceClassName", path, obj),
            selectors=_selectors(d, path, obj),
            allocation_mode=mode,
            count=count,
            admin_access=f.boolean(d, "adminAccess", path, obj),
            tolerations=_tolerations(d, path, obj),
            capacity=_capacity_requests(d, path, obj),
        )

    def to_dict(self, *, exactly: bool) -> dict[str, Any]:
        out: dict[str, Any] = {} if exactly else {"name": self.name}
        out["deviceClassName"] = self.device_class_name
        if self.selectors:
            out["selectors"] = [s.to_dict() for s in self.selectors]
        out["allocationMode"] = self.allocation_mode.value
        if self.allocation_mode is AllocationMode.EXACT_COUNT:
            out["count"] = self.count
        if exactly and self.admin_access:
            out["adminAccess"] = True
        if self.tolerations:
            out["tolerations"] = [t.to_dict() for t in self.tolerations]
        if self.capacity:
            out["capacity"] = {"requests": r.qty_map_dict(self.capacity)}
        return out


#: `exactly` has the same fields as a sub-request (and adminAccess), named by its request.
ExactDeviceRequest = DeviceSubRequest


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A request: exactly one of `exactly` and `first_available` is set."""

    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()

    @property
    def alternatives(self) -> tuple[DeviceSubRequest, ...]:
        """What may satisfy the request, in order of preference."""
        return (self.exactly,) if self.exactly is not None else self.first_available

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> DeviceRequest:
        d = f.mapping(raw, path, obj)
        name = r.required_string(d, "name", path, obj)
        has_exactly = d.get("exactly") is not None
        subs = f.items(d, "firstAvailable", path, obj)
        if has_exactly == bool(subs):
            raise ValidationError(path, "exactly one of exactly and firstAvailable must be set", obj=obj)
        if has_exactly:
            return cls(name, exactly=DeviceSubRequest.from_dict(d["exactly"], f"{path}.exactly", obj, name=name))
        if len(subs) > FIRST_AVAILABLE_MAX_SIZE:
            raise ValidationError(f"{path}.firstAvailable", f"at most {FIRST_AVAILABLE_MAX_SIZE} entries", obj=obj)
        parsed = tuple(DeviceSubRequest.from_dict(s, f"{path}.firstAvailable[{i}]", obj) for i, s in enumerate(subs))
        if len({s.name for s in parsed}) != len(parsed):
            raise ValidationError(f"{path}.firstAvailable", "sub-request names must be unique", obj=obj)
        return cls(name, first_available=parsed)

    def to_dict(self) -> dict[str, Any]:
        if self.exactly is not None:
            return {"name": self.name, "exactly": self.exactly.to_dict(exactly=True)}
        return {"name": self.name, "firstAvailable": [s.to_dict(exactly=False) for s in self.first_available]}


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    """`matchAttribute` (same value on every device) or `distinctAttribute` (all different), over
    `requests` (names, or `request/sub-request`; empty: every request of the claim)."""

    requests: tuple[str, ...] = ()
    match_attribute: str = ""
    distinct_attribute: str = ""

    def applies_to(self, request: str, sub_request: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (bool(sub_request) and f"{request}/{sub_request}" in self.requests)

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> DeviceConstraint:
        d = f.mapping(raw, path, obj)
        match = d.get("matchAttribute")
        distinct = d.get("distinctAttribute")
        if (match is None) == (distinct is None):
            raise ValidationError(path, "exactly one of matchAttribute and distinctAttribute must be set", obj=obj)
        return cls(
            requests=f.strings(d, "requests", path, obj),
            match_attribute="" if match is None else r.fully_qualified_name(match, f"{path}.matchAttribute", obj),
            distinct_attribute=""
            if distinct is None
            else r.fully_qualified_name(distinct, f"{path}.distinctAttribute", obj),
        )

    def to_dict(self) -> dict[str, Any]:
        return f.drop_empty(
            {
                "requests": list(self.requests),
                "matchAttribute": self.match_attribute,
                "distinctAttribute": self.distinct_attribute,
            }
        )


@dataclass(frozen=True, slots=True)
class DeviceConfiguration:
    """`opaque`: a driver's parameters, passed through to the allocation result as written."""

    driver: str
    parameters: Any

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> DeviceConfiguration:
        d = f.mapping(raw, path, obj)
        opaque = d.get("opaque")
        if opaque is None:
            raise ValidationError(f"{path}.opaque", "required (the only configuration type)", obj=obj)
        od = f.mapping(opaque, f"{path}.opaque", obj)
        if "parameters" not in od:
            raise ValidationError(f"{path}.opaque.parameters", "required", obj=obj)
        return cls(r.required_string(od, "driver", f"{path}.opaque", obj), od["parameters"])

    def to_dict(self) -> dict[str, Any]:
        return {"opaque": {"driver": self.driver, "parameters": self.parameters}}


@dataclass(frozen=True, slots=True)
class DeviceClaimConfiguration:
    requests: tuple[str, ...]
    config: DeviceConfiguration

    @classmethod
    def from_dict(cls, raw: object, path: str, obj: str = "") -> DeviceClaimConfiguration:
        d = f.mapping(raw, path, obj)
        return cls(f.strings(d, "requests", path, obj), DeviceConfiguration.from_dict(d, path, obj))


@dataclass(frozen=True, slots=True)
class ResourceClaimSpec:
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[DeviceClaimConfiguration, ...] = ()

    @classmethod
    def from_dict(cls, raw: object, path: str = "spec", obj: str = "") -> ResourceClaimSpec:
        d = f.mapping(raw, path, obj)
        dpath = f"{path}.devices"
        dd = f.mapping(d.get("devices"), dpath, obj)
        requests = tuple(
            DeviceRequest.from_dict(q, f"{dpath}.requests[{i}]", obj)
            for i, q in enumerate(f.items(dd, "requests", dpath, obj))
        )
        names = [q.name for q in requests]
        if len(set(names)) != len(names):
            raise ValidationError(f"{dpath}.requests", "request names must be unique", obj=obj)
        constraints = tuple(
            DeviceConstraint.from_dict(c, f"{dpath}.constraints[{i}]", obj)
            for i, c in enumerate(f.items(dd, "constraints", dpath, obj))
        )
        known = set(names) | {f"{q.name}/{s.name}" for q in requests for s in q.first_available}
        for i, c in enumerate(constraints):
            for name in c.requests:
                if name not in known:
                    raise ValidationError(f"{dpath}.constraints[{i}].requests", f"no request named {name!r}", obj=obj)
        config = tuple(
            DeviceClaimConfiguration.from_dict(c, f"{dpath}.config[{i}]", obj)
            for i, c in enumerate(f.items(dd, "config", dpath, obj))
        )
        return cls(requests, constraints, config)

    def to_dict(self) -> dict[str, Any]:
        devices: dict[str, Any] = {"requests": [q.to_dict() for q in self.requests]}
        if self.constraints:
            devices["constraints"] = [c.to_dict() for c in self.constraints]
        if self.config:
            devices["config"] = [{"requests": list(c.requests), **c.config.to_dict()} for c in self.config]
        return {"devices": devices}


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    meta: ObjectMeta
    spec: ResourceClaimSpec
    allocation: AllocationResult | None = None
    reserved_for: tuple[ConsumerReference, ...] = ()

    @property
    def key(self) -> str:
        return self.meta.key

    @classmethod
    def from_dict(cls, raw: object) -> ResourceClaim:
        d = f.mapping(raw, "resourceclaim")
        meta = ObjectMeta.from_dict(d.get("metadata"))
        obj = f"resourceclaim {meta.key}"
        status = f.mapping(d.get("status"), "status", obj)
        alloc = status.get("allocation")
        return cls(
            meta=meta,
            spec=ResourceClaimSpec.from_dict(d.get("spec"), "spec", obj),
            allocation=None if alloc is None else AllocationResult.from_dict(alloc, "status.allocation", obj),
            reserved_for=tuple(
                ConsumerReference.from_dict(c, f"status.reservedFor[{i}]", obj)
                for i, c in enumerate(f.items(status, "reservedFor", "status", obj))
            ),
        )


@dataclass(frozen=True, slots=True)
class DeviceClass:
    meta: ObjectMeta
    selectors: tuple[Selector, ...] = ()
    config: tuple[DeviceConfiguration, ...] = ()
    extended_resource_name: str = ""

    @property
    def name(self) -> str:
        return self.meta.name

    @classmethod
    def from_dict(cls, raw: object) -> DeviceClass:
        d = f.mapping(raw, "deviceclass")
        meta = ObjectMeta.from_dict(d.get("metadata"))
        obj = f"deviceclass {meta.name}"
        spec = f.mapping(d.get("spec"), "spec", obj)
        return cls(
            meta=meta,
            selectors=_selectors(spec, "spec", obj),
            config=tuple(
                DeviceConfiguration.from_dict(c, f"spec.config[{i}]", obj)
                for i, c in enumerate(f.items(spec, "config", "spec", obj))
            ),
            extended_resource_name=f.string(spec, "extendedResourceName", "spec", obj),
        )
