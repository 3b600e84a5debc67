"""The `scheduling.koordinator.sh/device-allocated` annotation: which devices a pod was given.

The scheduler writes it before binding; the agent's hooks read it to inject devices; every
restarted component rebuilds device accounting from it. The JSON is byte-compatible with what
Koordinator's Go code writes (`json.Marshal` of `map[DeviceType][]DeviceAllocation`): compact,
device types and resource names sorted, quantities as canonical strings, fields in the order
minor, resources, id, extension; empty `id` and `extension` omitted; in `extension`, `vfs`
then `gpuSharedResourceTemplate` (the template a GPU share was cut by, kept as read so a pod
taking a Reservation's devices carries it on), each omitted when empty; in a VF, `minor` then
`busID`, each omitted when zero or empty (Go's `omitempty`: koordlet's VFs all have minor -1,
so `{"minor":-1,"busID":"0000:01:00.2"}`, while a VF of minor 0 is `{"busID":...}`). Decoding reads
Koordinator's deprecated resource names (`kubernetes.io/gpu-core`, as schedulers before v1.2
wrote them) as the current ones, so such a pod is accounted and its container told its share
like any other; encoding writes only the current names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis._annotation import load_json
from apis.crds.device import DeviceType
from apis.errors import AnnotationError, QuantityError
from apis.extension import deprecated, names
from apis.k8s import resources

__all__ = ["DeviceAllocation", "DeviceAllocations", "VFAllocation", "decode", "encode", "from_pod_annotations"]

_KEY = names.ANNOTATION_DEVICE_ALLOCATED


@dataclass(frozen=True, slots=True)
class VFAllocation:
    minor: int
    bus_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Go's `omitempty` on both fields."""
        out: dict[str, Any] = {}
        if self.minor:
            out["minor"] = self.minor
        if self.bus_id:
            out["busID"] = self.bus_id
        return out


@dataclass(frozen=True, slots=True)
class DeviceAllocation:
    minor: int
    #: Base units (percent, bytes), as in `apis.k8s.resources`.
    resources: resources.ResourceList = field(default_factory=dict)
    id: str = ""
    vfs: tuple[VFAllocation, ...] = ()
    #: Koordinator's `extension.gpuSharedResourceTemplate`: which shared-resource template the
    #: share was cut by ("" when none). Tessera does not cut by templates; it keeps the name.
    gpu_shared_resource_template: str = ""

    def extension(self) -> dict[str, Any]:
        """Koordinator's `DeviceAllocationExtension` as JSON, empty fields left out."""
        out: dict[str, Any] = {}
        if self.vfs:
            out["vfs"] = [vf.to_dict() for vf in self.vfs]
        if self.gpu_shared_resource_template:
            out["gpuSharedResourceTemplate"] = self.gpu_shared_resource_template
        return out


#: Device type → the devices of that type the pod holds, in allocation order.
DeviceAllocations = Mapping[DeviceType, tuple[DeviceAllocation, ...]]


def encode(allocations: DeviceAllocations) -> str:
    """Serialize to the annotation value (deterministic; equal inputs give equal strings)."""
    doc: dict[str, list[dict[str, Any]]] = {}
    for dtype in sorted(allocations, key=lambda t: t.value):
        entries = []
        for alloc in allocations[dtype]:
            entry: dict[str, Any] = {"minor": alloc.minor, "resources": resources.format_list(alloc.resources)}
            if alloc.id:
                entry["id"] = alloc.id
            extension = alloc.extension()
            if extension:
                entry["extension"] = extension
            entries.append(entry)
        doc[dtype.value] = entries
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def from_pod_annotations(
    annotations: Mapping[str, str], *, obj: str = ""
) -> dict[DeviceType, tuple[DeviceAllocation, ...]]:
    """Decode the annotation if present; an absent annotation means no devices."""
    raw = annotations.get(_KEY)
    return decode(raw, obj=obj) if raw else {}


def decode(text: str, *, obj: str = "") -> dict[DeviceType, tuple[DeviceAllocation, ...]]:
    """Parse an annotation value; allocations of device types Tessera does not allocate (a
    Koordinator scheduler's NPUs) are left out, they hold none of its devices. Raises
    AnnotationError (and nothing else) on malformed input."""
    doc = load_json(_KEY, text, obj, expect=dict, shape="a JSON object of device type to list of allocations")
    out: dict[DeviceType, tuple[DeviceAllocation, ...]] = {}
    for type_text, entries in doc.items():
        try:
            dtype = DeviceType(type_text)
        except ValueError:
            continue  # a type Tessera does not allocate (an NPU Koordinator gave): none of its devices
        if not isinstance(entries, list):
            raise AnnotationError(_KEY, f"{type_text}: expected a list of allocations", obj=obj)
        decoded = tuple(_decode_entry(e, dtype, f"{type_text}[{i}]", obj) for i, e in enumerate(entries))
        minors = [a.minor for a in decoded]
        if len(set(minors)) != len(minors):
            raise AnnotationError(_KEY, f"{type_text}: the same minor is listed twice", obj=obj)
        out[dtype] = decoded
    return out


def _decode_entry(entry: object, dtype: DeviceType, where: str, obj: str) -> DeviceAllocation:
    if not isinstance(entry, dict):
        raise AnnotationError(_KEY, f"{where}: expected an object", obj=obj)
    minor = entry.get("minor", 0)
    if isinstance(minor, bool) or not isinstance(minor, int):
        raise AnnotationError(_KEY, f"{where}.minor: expected an integer, got {minor!r}", obj=obj)
    if minor < 0 and dtype is DeviceType.GPU:  # no /dev/nvidia-1 (RDMA/FPGA are known by id)
        raise AnnotationError(_KEY, f"{where}.minor: expected a non-negative integer, got {minor!r}", obj=obj)
    raw_resources = entry.get("resources") or {}
    if not isinstance(raw_resources, dict):
        raise AnnotationError(_KEY, f"{where}.resources: expected an object", obj=obj)
    parsed: dict[str, int] = {}
    for name, value in raw_resources.items():
        try:
            parsed[name] = resources.to_int(name, value)
        except QuantityError as e:
            raise AnnotationError(_KEY, f"{where}.resources[{name}]: {e.reason} (got {value!r})", obj=obj) from None
        if parsed[name] < 0:
            raise AnnotationError(_KEY, f"{where}.resources[{name}]: must not be negative", obj=obj)
    dev_id = entry.get("id", "")
    if not isinstance(dev_id, str):
        raise AnnotationError(_KEY, f"{where}.id: expected a string", obj=obj)
    extension = entry.get("extension") or {}
    if not isinstance(extension, dict):
        raise AnnotationError(_KEY, f"{where}.extension: expected an object", obj=obj)
    template = extension.get("gpuSharedResourceTemplate") or ""
    if not isinstance(template, str):
        raise AnnotationError(_KEY, f"{where}.extension.gpuSharedResourceTemplate: expected a string", obj=obj)
    return DeviceAllocation(
        minor=minor,
        resources=deprecated.to_current(parsed),
        id=dev_id,
        vfs=_decode_vfs(extension, where, obj),
        gpu_shared_resource_template=template,
    )


def _decode_vfs(extension: Mapping[str, Any], where: str, obj: str) -> tuple[VFAllocation, ...]:
    vfs = extension.get("vfs") or []
    if not isinstance(vfs, list):
        raise AnnotationError(_KEY, f"{where}.extension.vfs: expected a list", obj=obj)
    out = []
    for i, vf in enumerate(vfs):
        minor = vf.get("minor", 0) if isinstance(vf, dict) else None
        bus_id = vf.get("busID", "") if isinstance(vf, dict) else None
        if isinstance(minor, bool) or not isinstance(minor, int) or not isinstance(bus_id, str):
            raise AnnotationError(_KEY, f"{where}.extension.vfs[{i}]: expected {{minor: int, busID: str}}", obj=obj)
        out.append(VFAllocation(minor, bus_id))
    return tuple(out)
