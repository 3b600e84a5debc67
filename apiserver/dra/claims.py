"""ResourceClaims and ResourceClaimTemplates: kube-apiserver's defaults and validation.

A claim's spec (`devices`: requests, constraints, config) is defaulted and checked once, on
create, and is immutable afterwards; a template carries the same spec under `spec.spec` (with
the metadata its claims get) and is immutable too. A claim's status is written through its status
subresource, by the scheduler (the allocation and the pods it is reserved for) and by the
resourceclaim controller (consumers gone, allocation cleared): an allocation, once set, can only be
removed, never changed; `reservedFor` needs an allocation, holds at most 256 consumers with unique
uids, and a claim being deleted takes no new consumer; results name the claim's own requests.

Messages follow kube-apiserver's wording (k8s.io/kubernetes pkg/apis/resource/validation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from apiserver.dra import checks
from apiserver.dra.checks import go, mapping, objects
from apiserver.errors import Cause
from apiserver.strategy import Strategy
from apiserver.validation import qualified_name, validate_metadata

__all__ = [
    "ResourceClaimStrategy",
    "ResourceClaimTemplateStrategy",
    "default_claim_spec",
    "request_names",
    "validate_claim_spec",
]

ALLOCATION_MODES: Final = ("All", "ExactCount")
FIRST_AVAILABLE_MAX: Final = 8
DEVICE_CONSTRAINTS_MAX: Final = 32
RESERVED_FOR_MAX: Final = 256
ALLOCATION_RESULTS_MAX: Final = 32
TOLERATION_OPERATORS: Final = ("Equal", "Exists")
TAINT_EFFECTS: Final = ("NoExecute", "NoSchedule", "None")
CONFIG_SOURCES: Final = ("FromClaim", "FromClass")
_REQUEST_REF: Final = (
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
)
_IMMUTABLE: Final = 'Invalid value: "object": field is immutable'


def _default_request(request: dict[str, Any]) -> None:
    """kube's SetDefaults_ExactDeviceRequest / _DeviceSubRequest: ExactCount of one device; a
    toleration's operator `Equal`."""
    if not request.get("allocationMode"):
        request["allocationMode"] = "ExactCount"
    if request["allocationMode"] == "ExactCount" and not request.get("count"):
        request["count"] = 1
    for toleration in objects(request.get("tolerations")):
        if isinstance(toleration, dict) and not toleration.get("operator"):
            toleration["operator"] = "Equal"


def default_claim_spec(spec: Any) -> None:
    """Fill a ResourceClaimSpec's defaults in place (a claim's `spec`, a template's `spec.spec`)."""
    devices = spec.get("devices") if isinstance(spec, dict) else None
    if not isinstance(devices, dict):
        return
    for request in objects(devices.get("requests")):
        if not isinstance(request, dict):
            continue
        if isinstance(request.get("exactly"), dict):
            _default_request(request["exactly"])
        for sub in objects(request.get("firstAvailable")):
            if isinstance(sub, dict):
                _default_request(sub)


def request_names(spec: Any) -> dict[str, set[str]]:
    """The claim's requests, each with its subrequests' names (empty for `exactly`)."""
    out: dict[str, set[str]] = {}
    for request in objects(mapping(mapping(spec).get("devices")).get("requests")):
        name = mapping(request).get("name")
        if isinstance(name, str):
            out[name] = {str(mapping(s).get("name")) for s in objects(mapping(request).get("firstAvailable"))}
    return out


def _request_ref(value: Any, path: str, names: Mapping[str, set[str]]) -> list[Cause]:
    """`request` or `request/subrequest`, naming one of the claim's."""
    if not isinstance(value, str):
        return [Cause.required(path)]
    parts = value.split("/")
    if len(parts) > 2:
        return [Cause.invalid(path, value, _REQUEST_REF)]
    causes = [c for part in parts for c in checks.label(part, path)]
    known = parts[0] in names and (len(parts) == 1 or parts[1] in names[parts[0]])
    if not known:
        causes.append(Cause.invalid(path, value, _REQUEST_REF))
    return causes


def _request_refs(value: Any, path: str, names: Mapping[str, set[str]]) -> list[Cause]:
    refs = objects(value)
    causes = checks.bounded(refs, checks.DEVICE_REQUESTS_MAX, path)
    causes += checks.unique(refs, lambda r: r if isinstance(r, str) else None, path)
    for i, ref in enumerate(refs):
        causes += _request_ref(ref, f"{path}[{i}]", names)
    return causes


def _tolerations(value: Any, path: str) -> list[Cause]:
    causes = []
    for i, toleration in enumerate(objects(value)):
        where = f"{path}[{i}]"
        t = mapping(toleration)
        key, operator, effect = t.get("key"), t.get("operator", "Equal"), t.get("effect")
        if key and (why := qualified_name(str(key))):
            causes.append(Cause.invalid(f"{where}.key", str(key), why))
        if operator not in TOLERATION_OPERATORS:
            causes.append(Cause.not_supported(f"{where}.operator", operator, TOLERATION_OPERATORS))
        elif operator == "Exists" and t.get("value"):
            causes.append(
                Cause.invalid(f"{where}.operator", str(t["value"]), "value must be empty when `operator` is 'Exists'")
            )
        if effect and effect not in TAINT_EFFECTS:
            causes.append(Cause.not_supported(f"{where}.effect", effect, TAINT_EFFECTS))
    return causes


def _allocation_mode(request: Mapping[str, Any], path: str) -> list[Cause]:
    mode, count = request.get("allocationMode"), request.get("count", 0)
    if mode == "All":
        return (
            [Cause.invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'")]
            if count
            else []
        )
    if mode == "ExactCount":
        if not isinstance(count, int) or count <= 0:
            return [Cause.invalid(f"{path}.count", count, "must be greater than zero")]
        return []
    return [Cause.not_supported(f"{path}.allocationMode", mode, ALLOCATION_MODES)]


def _exact(request: Mapping[str, Any], path: str) -> list[Cause]:
    """An `exactly` request or a `firstAvailable` subrequest's device part."""
    causes = checks.subdomain(request.get("deviceClassName"), f"{path}.deviceClassName")
    causes += checks.selectors(request.get("selectors"), f"{path}.selectors")
    causes += _allocation_mode(request, path)
    causes += _tolerations(request.get("tolerations"), f"{path}.tolerations")
    return causes


def _request(request: Any, path: str) -> list[Cause]:
    r = mapping(request)
    causes = checks.label(r.get("name"), f"{path}.name")
    exactly, first = r.get("exactly"), objects(r.get("firstAvailable"))
    if exactly is None and not first:
        causes.append(Cause.required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    elif exactly is not None and first:
        causes.append(
            Cause(
                path,
                "Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, "
                "but multiple fields are set",
            )
        )
    elif first:
        where = f"{path}.firstAvailable"
        causes += checks.bounded(first, FIRST_AVAILABLE_MAX, where)
        causes += checks.unique(first, lambda s: mapping(s).get("name"), where, field="name")
        for i, sub in enumerate(first):
            causes += checks.label(mapping(sub).get("name"), f"{where}[{i}].name")
            causes += _exact(mapping(sub), f"{where}[{i}]")
    else:
        causes += _exact(mapping(exactly), f"{path}.exactly")
    return causes


def validate_claim_spec(spec: Any, path: str) -> list[Cause]:
    """A ResourceClaimSpec (`path`: `spec`, or `spec.spec` in a template)."""
    devices = mapping(mapping(spec).get("devices"))
    where = f"{path}.devices"
    requests = objects(devices.get("requests"))
    causes = checks.bounded(requests, checks.DEVICE_REQUESTS_MAX, f"{where}.requests")
    causes += checks.unique(requests, lambda r: mapping(r).get("name"), f"{where}.requests", field="name")
    for i, request in enumerate(requests):
        causes += _request(request, f"{where}.requests[{i}]")
    names = request_names(spec)
    constraints = objects(devices.get("constraints"))
    causes += checks.bounded(constraints, DEVICE_CONSTRAINTS_MAX, f"{where}.constraints")
    for i, constraint in enumerate(constraints):
        c, at = mapping(constraint), f"{where}.constraints[{i}]"
        causes += _request_refs(c.get("requests"), f"{at}.requests", names)
        if c.get("matchAttribute") is not None:
            causes += checks.fully_qualified_name(c["matchAttribute"], f"{at}.matchAttribute")
        elif c.get("distinctAttribute") is not None:
            causes += checks.fully_qualified_name(c["distinctAttribute"], f"{at}.distinctAttribute")
        else:
            causes.append(Cause.required(at, 'exactly one of "matchAttribute" or "distinctAttribute" is required'))
    config = objects(devices.get("config"))
    causes += checks.bounded(config, checks.DEVICE_CONFIG_MAX, f"{where}.config")
    for i, entry in enumerate(config):
        causes += _request_refs(mapping(entry).get("requests"), f"{where}.config[{i}].requests", names)
        causes += checks.device_configuration(mapping(entry), f"{where}.config[{i}]")
    return causes


def _consumer_key(ref: Any) -> Any:
    uid = mapping(ref).get("uid")
    return uid if isinstance(uid, str) else None


def _reserved_for(status: Mapping[str, Any], old: Mapping[str, Any], deleting: bool) -> list[Cause]:
    refs = objects(status.get("reservedFor"))
    path = "status.reservedFor"
    causes = checks.bounded(refs, RESERVED_FOR_MAX, path)
    causes += checks.unique(refs, _consumer_key, path, field="uid")
    for i, ref in enumerate(refs):
        r = mapping(ref)
        causes += [Cause.required(f"{path}[{i}].{f}") for f in ("resource", "name", "uid") if not r.get(f)]
    if refs and status.get("allocation") is None:
        causes.append(Cause.forbidden(path, "may not be specified when `allocated` is not set"))
    elif refs and deleting:
        before = {_consumer_key(r) for r in objects(old.get("reservedFor"))}
        if any(_consumer_key(r) not in before for r in refs):
            causes.append(
                Cause.forbidden(
                    path, "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"
                )
            )
    return causes


def _allocation(allocation: Mapping[str, Any], names: Mapping[str, set[str]]) -> list[Cause]:
    """A new allocation: each result names one of the claim's requests, a driver, pool and device."""
    path = "status.allocation.devices"
    devices = mapping(allocation.get("devices"))
    results = objects(devices.get("results"))
    causes = checks.bounded(results, ALLOCATION_RESULTS_MAX, f"{path}.results")
    for i, result in enumerate(results):
        r, at = mapping(result), f"{path}.results[{i}]"
        causes += _request_ref(r.get("request"), f"{at}.request", names)
        causes += checks.driver_name(r.get("driver"), f"{at}.driver")
        causes += checks.pool_name(r.get("pool"), f"{at}.pool")
        causes += checks.label(r.get("device"), f"{at}.device")
        causes += _tolerations(r.get("tolerations"), f"{at}.tolerations")
    for i, entry in enumerate(objects(devices.get("config"))):
        e, at = mapping(entry), f"{path}.config[{i}]"
        source = e.get("source")
        if not source:
            causes.append(Cause.required(f"{at}.source"))
        elif source not in CONFIG_SOURCES:
            causes.append(Cause.not_supported(f"{at}.source", source, CONFIG_SOURCES))
        causes += _request_refs(e.get("requests"), f"{at}.requests", names)
        causes += checks.device_configuration(e, at)
    return causes


def _status_devices(status: Mapping[str, Any]) -> list[Cause]:
    """Drivers' reports per allocated device: unique by (driver, pool, device, shareID), and only
    for devices the allocation holds."""
    path = "status.devices"
    entries = objects(status.get("devices"))

    def key(d: Any) -> tuple[Any, ...]:
        m = mapping(d)
        return (m.get("driver"), m.get("pool"), m.get("device"), m.get("shareID"))

    allocated = {key(r) for r in objects(mapping(mapping(status.get("allocation")).get("devices")).get("results"))}
    causes = checks.unique(entries, lambda d: go(key(d)), path)
    for i, entry in enumerate(entries):
        if key(entry) not in allocated:
            causes.append(Cause.invalid(f"{path}[{i}]", go(key(entry)), "must be an allocated device in the claim"))
    return causes


def validate_claim_status(obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """A status write, against the stored claim."""
    status, before = mapping(obj.get("status")), mapping(old.get("status"))
    deleting = bool(mapping(obj.get("metadata")).get("deletionTimestamp"))
    causes = _reserved_for(status, before, deleting)
    causes += _status_devices(status)
    allocation, was = status.get("allocation"), before.get("allocation")
    if allocation is not None and was is not None:
        if allocation != was:
            causes.append(Cause("status.allocation", _IMMUTABLE))
    elif isinstance(allocation, Mapping):
        causes += _allocation(allocation, request_names(obj.get("spec")))
    return causes


class ResourceClaimStrategy(Strategy):
    """A claim: its spec defaulted and checked on create, immutable after; its status the
    scheduler's and the controllers' (status subresource), empty on create."""

    def prepare_create(self, obj: dict[str, Any]) -> None:
        default_claim_spec(obj.get("spec"))
        obj["status"] = {}

    def prepare_status(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        # As kube's strategy: a claim deallocated drops its drivers' device reports with it.
        status = new.get("status")
        if (
            isinstance(status, dict)
            and status.get("allocation") is None
            and mapping(old.get("status")).get("allocation")
        ):
            status.pop("devices", None)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        if old is None:
            if not isinstance(obj.get("spec"), Mapping):
                return [*causes, Cause.required("spec")]
            return causes + validate_claim_spec(obj["spec"], "spec")
        if obj.get("spec") != old.get("spec"):
            causes.append(Cause("spec", _IMMUTABLE, "FieldValueInvalid"))
        if obj.get("status") != old.get("status"):
            causes += validate_claim_status(obj, old)
        return causes


class ResourceClaimTemplateStrategy(Strategy):
    """A template: the metadata and spec of the claims made from it; immutable."""

    def prepare_create(self, obj: dict[str, Any]) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            default_claim_spec(spec.get("spec"))

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        if old is not None:
            if obj.get("spec") != old.get("spec"):
                causes.append(Cause("spec", _IMMUTABLE, "FieldValueInvalid"))
            return causes
        spec = obj.get("spec")
        if not isinstance(spec, Mapping):
            return [*causes, Cause.required("spec")]
        meta = mapping(spec.get("metadata"))
        causes += [
            Cause(f"spec.{c.field}", c.message, c.reason)
            for c in validate_metadata({k: v for k, v in meta.items() if k in ("labels", "annotations")})
        ]
        return causes + validate_claim_spec(spec.get("spec"), "spec.spec")
