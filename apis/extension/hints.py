"""Pod annotations that steer device placement: `device-allocate-hint` and `device-joint-allocate`.

`device-allocate-hint` maps a device type to a `DeviceHint` (which devices and VFs qualify, how
the request counts, the narrowest topology scope allowed, and exclusivity);
`device-joint-allocate` asks for several device types from the same PCIe switches (the first
type is primary). Shapes follow Koordinator's `apis/extension/device_share.go`.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from apis._annotation import load_json
from apis.crds.device import DeviceType
from apis.errors import AnnotationError, ValidationError
from apis.extension import names
from apis.k8s import labels

__all__ = [
    "AllocateStrategy",
    "DeviceHint",
    "ExclusivePolicy",
    "JointAllocate",
    "TopologyScope",
    "decode_hints",
    "decode_joint_allocate",
    "encode_hints",
    "encode_joint_allocate",
    "hints_from_annotations",
    "joint_allocate_from_annotations",
]


class AllocateStrategy(enum.Enum):
    APPLY_FOR_ALL = "ApplyForAll"  # the request applies to every matching device
    REQUESTS_AS_COUNT = "RequestsAsCount"  # the request's value is a number of devices


class TopologyScope(enum.Enum):
    DEVICE = "Device"
    PCIE = "PCIe"
    NUMA_NODE = "NUMANode"
    NODE = "Node"


class ExclusivePolicy(enum.Enum):
    DEVICE_LEVEL = "DeviceLevel"  # no other pod on the devices given
    PCIE_LEVEL = "PCIeLevel"  # no other pod's device of this type on the same PCIe switch


@dataclass(frozen=True, slots=True)
class DeviceHint:
    selector: labels.LabelSelector | None = None
    vf_selector: labels.LabelSelector | None = None
    allocate_strategy: AllocateStrategy | None = None
    required_topology_scope: TopologyScope | None = None
    exclusive_policy: ExclusivePolicy | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.selector is not None:
            out["selector"] = self.selector.to_dict()
        if self.vf_selector is not None:
            out["vfSelector"] = self.vf_selector.to_dict()
        if self.allocate_strategy is not None:
            out["allocateStrategy"] = self.allocate_strategy.value
        if self.required_topology_scope is not None:
            out["requiredTopologyScope"] = self.required_topology_scope.value
        if self.exclusive_policy is not None:
            out["exclusivePolicy"] = self.exclusive_policy.value
        return out


class JointScope(enum.Enum):
    SAME_PCIE = "SamePCIe"


@dataclass(frozen=True, slots=True)
class JointAllocate:
    device_types: tuple[DeviceType, ...]
    required_scope: JointScope | None = None

    @property
    def primary(self) -> DeviceType:
        """The first type (callers use it only with two types or more: `effective_joint`)."""
        return self.device_types[0]


def _load_object(key: str, text: object, obj: str) -> dict[str, Any]:
    doc: dict[str, Any] = load_json(key, text, obj, expect=dict, shape="a JSON object")
    return doc


_E = TypeVar("_E", bound=enum.Enum)


def _enum(key: str, cls: type[_E], raw: object, where: str, obj: str) -> _E | None:
    if raw is None or raw == "":
        return None
    try:
        return cls(raw)
    except ValueError:
        allowed = ", ".join(m.value for m in cls)
        raise AnnotationError(key, f"{where}: {raw!r} is not one of {allowed}", obj=obj) from None


def decode_hints(text: str, *, obj: str = "") -> dict[DeviceType, DeviceHint]:
    """Parse `device-allocate-hint`. Hints for device types Tessera does not allocate are left
    out (Koordinator's map takes any type). Raises AnnotationError on malformed input."""
    key = names.ANNOTATION_DEVICE_ALLOCATE_HINT
    out: dict[DeviceType, DeviceHint] = {}
    known = {t.value: t for t in DeviceType}
    for type_text, raw in _load_object(key, text, obj).items():
        if type_text not in known:
            continue  # a type Tessera does not allocate (an NPU's): Koordinator keeps it, nothing here asks for it
        dtype = known[type_text]
        if not isinstance(raw, dict):
            raise AnnotationError(key, f"{type_text}: expected an object", obj=obj)
        try:
            selector = (
                labels.LabelSelector.from_dict(raw["selector"], f"{type_text}.selector")
                if raw.get("selector") is not None
                else None
            )
            vf_selector = (
                labels.LabelSelector.from_dict(raw["vfSelector"], f"{type_text}.vfSelector")
                if raw.get("vfSelector") is not None
                else None
            )
        except ValidationError as e:
            raise AnnotationError(key, str(e), obj=obj) from None
        out[dtype] = DeviceHint(
            selector=selector,
            vf_selector=vf_selector,
            allocate_strategy=_enum(
                key, AllocateStrategy, raw.get("allocateStrategy"), f"{type_text}.allocateStrategy", obj
            ),
            required_topology_scope=_enum(
                key, TopologyScope, raw.get("requiredTopologyScope"), f"{type_text}.requiredTopologyScope", obj
            ),
            exclusive_policy=_enum(
                key, ExclusivePolicy, raw.get("exclusivePolicy"), f"{type_text}.exclusivePolicy", obj
            ),
        )
    return out


def encode_hints(hints: Mapping[DeviceType, DeviceHint]) -> str:
    doc = {t.value: hints[t].to_dict() for t in sorted(hints, key=lambda t: t.value)}
    return json.dumps(doc, separators=(",", ":"))


def decode_joint_allocate(text: str, *, obj: str = "") -> JointAllocate:
    """Parse `device-joint-allocate` as Koordinator does: it only JSON-decodes the object, so a
    list of one type, a repeated type, a type Tessera does not allocate or a `requiredScope` it
    does not know are not errors. The types are kept in order, repeats and unknown types left
    out (`PodDeviceRequest.effective_joint` then keeps only the types the pod asks for, and
    needs two); an unknown scope is no scope (Koordinator enforces only `SamePCIe`). Raises
    AnnotationError when the value is not a JSON object or `deviceTypes` not a list of strings."""
    key = names.ANNOTATION_DEVICE_JOINT_ALLOCATE
    doc = _load_object(key, text, obj)
    raw_types = doc.get("deviceTypes") or []
    if not isinstance(raw_types, list) or not all(isinstance(t, str) for t in raw_types):
        raise AnnotationError(key, "deviceTypes must be a list of device types", obj=obj)
    known = {t.value: t for t in DeviceType}
    types = tuple(dict.fromkeys(known[t] for t in raw_types if t in known))
    scope_text = doc.get("requiredScope")
    scope = next((s for s in JointScope if s.value == scope_text), None)
    return JointAllocate(types, scope)


def encode_joint_allocate(joint: JointAllocate) -> str:
    doc: dict[str, Any] = {"deviceTypes": [t.value for t in joint.device_types]}
    if joint.required_scope is not None:
        doc["requiredScope"] = joint.required_scope.value
    return json.dumps(doc, separators=(",", ":"))


def hints_from_annotations(annotations: Mapping[str, str], *, obj: str = "") -> dict[DeviceType, DeviceHint]:
    raw = annotations.get(names.ANNOTATION_DEVICE_ALLOCATE_HINT)
    return decode_hints(raw, obj=obj) if raw else {}


def joint_allocate_from_annotations(annotations: Mapping[str, str], *, obj: str = "") -> JointAllocate | None:
    raw = annotations.get(names.ANNOTATION_DEVICE_JOINT_ALLOCATE)
    return decode_joint_allocate(raw, obj=obj) if raw else None
