"""ResourceSlices: kube-apiserver's defaults and validation of what a driver publishes.

A slice belongs to one driver and one pool (immutable, as its node), is reachable from exactly
one of `nodeName`, `nodeSelector`, `allNodes` or `perDeviceNodeSelection`, and lists devices or
shared counters, not both. Devices have unique DNS-label names, attributes with exactly one
value, qualified attribute and capacity names, and taints whose `timeAdded` the server fills.
The scheduler trusts what passes here; what a driver may say about a device beyond these rules
is the driver's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from apis.dra.slice import MAX_DEVICES, MAX_DEVICES_WITH_ADVANCED_FEATURES
from apis.k8s.meta import now_rfc3339
from apiserver.dra import checks
from apiserver.dra.checks import mapping, objects
from apiserver.errors import Cause
from apiserver.strategy import Strategy
from apiserver.validation import dns_subdomain, qualified_name

__all__ = ["ResourceSliceStrategy"]

MAX_COUNTER_SETS: Final = 8
MAX_ATTRIBUTES_AND_CAPACITIES: Final = 32
MAX_ATTRIBUTE_VALUE: Final = 64
MAX_TAINTS: Final = 16
TAINT_EFFECTS: Final = ("NoExecute", "NoSchedule", "None")
_SINGLE_VALUES: Final = ("bool", "int", "string", "version")
_LIST_VALUES: Final = ("bools", "ints", "strings", "versions")
_SEMVER: Final = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?"
)
_NODE_SELECTION: Final = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"


def _attribute(value: Any, path: str) -> list[Cause]:
    attr = mapping(value)
    present = [k for k in (*_SINGLE_VALUES, *_LIST_VALUES) if attr.get(k) is not None]
    causes = []
    if len(present) != 1:
        causes.append(Cause.invalid(path, "", "exactly one value must be specified"))
    for key in present:
        items = attr[key] if key in _LIST_VALUES else [attr[key]]
        if key in _LIST_VALUES and not items:
            causes.append(Cause.invalid(f"{path}.{key}", "[]", "must not be empty if specified"))
        for item in items:
            if key in ("string", "strings", "version", "versions") and len(str(item)) > MAX_ATTRIBUTE_VALUE:
                causes.append(Cause.too_long(f"{path}.{key}", MAX_ATTRIBUTE_VALUE))
            if key in ("version", "versions") and not _SEMVER.fullmatch(str(item)):
                causes.append(
                    Cause.invalid(f"{path}.{key}", str(item), "must be a string compatible with semver.org spec 2.0.0")
                )
    return causes


def _taints(device: Mapping[str, Any], path: str) -> list[Cause]:
    taints = objects(device.get("taints"))
    causes = checks.bounded(taints, MAX_TAINTS, path)
    for i, taint in enumerate(taints):
        t, at = mapping(taint), f"{path}[{i}]"
        key = t.get("key")
        if not isinstance(key, str) or not key:
            causes.append(Cause.required(f"{at}.key"))
        elif why := qualified_name(key):
            causes.append(Cause.invalid(f"{at}.key", key, why))
        effect = t.get("effect")
        if not effect:
            causes.append(Cause.required(f"{at}.effect"))
        elif effect not in TAINT_EFFECTS:
            causes.append(Cause.not_supported(f"{at}.effect", effect, TAINT_EFFECTS))
    return causes


def _device(device: Any, path: str, per_device: bool) -> list[Cause]:
    d = mapping(device)
    causes = checks.label(d.get("name"), f"{path}.name")
    attributes, capacity = mapping(d.get("attributes")), mapping(d.get("capacity"))
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        causes.append(
            Cause.invalid(
                path,
                len(attributes) + len(capacity),
                f"the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}",
            )
        )
    for name, attr in attributes.items():
        causes += checks.qualified_name(name, f"{path}.attributes")
        causes += _attribute(attr, f"{path}.attributes[{name}]")
    multiple = d.get("allowMultipleAllocations") is True
    for name, cap in capacity.items():
        causes += checks.qualified_name(name, f"{path}.capacity")
        if mapping(cap).get("requestPolicy") is not None and not multiple:
            causes.append(
                Cause.forbidden(f"{path}.capacity[{name}].requestPolicy", "allowMultipleAllocations must be true")
            )
    causes += _taints(d, f"{path}.taints")
    consumes = objects(d.get("consumesCounters"))
    causes += checks.unique(
        consumes, lambda c: mapping(c).get("counterSet"), f"{path}.consumesCounters", field="counterSet"
    )
    for i, consumption in enumerate(consumes):
        c = mapping(consumption)
        causes += checks.label(c.get("counterSet"), f"{path}.consumesCounters[{i}].counterSet")
        if not mapping(c.get("counters")):
            causes.append(Cause.required(f"{path}.consumesCounters[{i}].counters"))
    selection = [f for f in ("nodeName", "nodeSelector", "allNodes") if d.get(f) is not None]
    if per_device and len(selection) != 1:
        detail = (
            "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
            "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"
        )
        causes.append(Cause.required(path, detail) if not selection else Cause.invalid(path, "", detail))
    elif not per_device and selection:
        causes.append(
            Cause(
                path,
                "Invalid value: null: `nodeName`, `nodeSelector` and `allNodes` can only be set if "
                "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            )
        )
    return causes


def _node_selection(spec: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    chosen = []
    node = spec.get("nodeName")
    if node is not None:
        if not node:
            causes.append(Cause.invalid("spec.nodeName", "", "must be either unset or set to a non-empty string"))
        else:
            chosen.append("`nodeName`")
            if why := dns_subdomain(str(node)):
                causes.append(Cause.invalid("spec.nodeName", str(node), why))
    if spec.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        if len(objects(mapping(spec["nodeSelector"]).get("nodeSelectorTerms"))) != 1:
            causes.append(
                Cause.invalid("spec.nodeSelector.nodeSelectorTerms", "", "must have exactly one node selector term")
            )
    for flag in ("allNodes", "perDeviceNodeSelection"):
        if spec.get(flag) is not None:
            if spec[flag] is True:
                chosen.append(f"`{flag}`")
            else:
                causes.append(Cause.invalid(f"spec.{flag}", False, "must be either unset or set to true"))
    if not chosen:
        causes.append(Cause.required("spec", _NODE_SELECTION))
    elif len(chosen) > 1:
        causes.append(
            Cause.invalid("spec", "{" + ", ".join(chosen) + "}", _NODE_SELECTION + ", but multiple fields are set")
        )
    return causes


def _advanced(devices: list[Any]) -> bool:
    """Devices with taints, counters or list attributes: a slice holds at most 64 of them."""
    return any(
        mapping(d).get("taints")
        or mapping(d).get("consumesCounters")
        or any(
            mapping(a).get(k) is not None for a in mapping(mapping(d).get("attributes")).values() for k in _LIST_VALUES
        )
        for d in devices
    )


class ResourceSliceStrategy(Strategy):
    def prepare_create(self, obj: dict[str, Any]) -> None:
        _default_taints(obj)

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        _default_taints(new)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        spec = mapping(obj.get("spec"))
        causes += checks.driver_name(spec.get("driver"), "spec.driver")
        pool = mapping(spec.get("pool"))
        causes += checks.pool_name(pool.get("name"), "spec.pool.name")
        count, generation = pool.get("resourceSliceCount", 0), pool.get("generation", 0)
        if not isinstance(count, int) or count <= 0:
            causes.append(Cause.invalid("spec.pool.resourceSliceCount", count, "must be greater than zero"))
        if not isinstance(generation, int) or generation < 0:
            causes.append(Cause.invalid("spec.pool.generation", generation, "must be greater than or equal to zero"))
        if old is not None:
            before = mapping(old.get("spec"))
            for path, new_value, old_value in (
                ("spec.pool.name", pool.get("name"), mapping(before.get("pool")).get("name")),
                ("spec.driver", spec.get("driver"), before.get("driver")),
                ("spec.nodeName", spec.get("nodeName"), before.get("nodeName")),
            ):
                if new_value != old_value:
                    causes.append(Cause.invalid(path, str(new_value or ""), "field is immutable"))
        causes += _node_selection(spec)
        if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
            causes.append(Cause.invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed"))
        devices = objects(spec.get("devices"))
        limit = MAX_DEVICES_WITH_ADVANCED_FEATURES if _advanced(devices) else MAX_DEVICES
        causes += checks.bounded(devices, limit, "spec.devices")
        causes += checks.unique(devices, lambda d: mapping(d).get("name"), "spec.devices", field="name")
        per_device = spec.get("perDeviceNodeSelection") is True
        for i, device in enumerate(devices):
            causes += _device(device, f"spec.devices[{i}]", per_device)
        counters = objects(spec.get("sharedCounters"))
        causes += checks.bounded(counters, MAX_COUNTER_SETS, "spec.sharedCounters")
        causes += checks.unique(counters, lambda c: mapping(c).get("name"), "spec.sharedCounters", field="name")
        for i, counter_set in enumerate(counters):
            causes += checks.label(mapping(counter_set).get("name"), f"spec.sharedCounters[{i}].name")
            if not mapping(mapping(counter_set).get("counters")):
                causes.append(Cause.required(f"spec.sharedCounters[{i}].counters"))
        return causes


def _default_taints(obj: dict[str, Any]) -> None:
    """kube's SetDefaults_DeviceTaint: a taint without `timeAdded` was added now."""
    for device in objects(mapping(obj.get("spec")).get("devices")):
        for taint in objects(mapping(device).get("taints")):
            if isinstance(taint, dict) and not taint.get("timeAdded"):
                taint["timeAdded"] = now_rfc3339()
