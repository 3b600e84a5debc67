"""kube-apiserver's rules for the resources a pod asks for (its `ValidateResourceRequirements`).

Why here: past the API server every component turns quantities into integers in base units,
rounding up (`apis.k8s.resources`), so a `nvidia.com/gpu: 0.5` that kube-apiserver refuses would be
stored and then scheduled as a whole GPU. Refusing it at the door, with kube's field paths and
messages, keeps Tessera's pods the pods a real cluster accepts, and `kubectl` prints the errors as
it prints kube's. `pods.PodStrategy.validate` calls `validate_pod` on create and on every update
that changes the spec, after defaulting has copied limits into missing requests (as kube does).

The rules, per container (and for `spec.overhead`, checked as limits):
- a name is a qualified name; without a domain it is `cpu`, `memory`, `ephemeral-storage` or
  `hugepages-<size>`; with a domain outside `kubernetes.io/` it is an *extended* resource;
- no quantity is negative; an extended quantity is an integer;
- a request of an overcommitable resource (native and not hugepages: cpu, memory,
  `kubernetes.io/batch-cpu`, ...) is at most its limit; any other request equals its limit, and
  has one;
- hugepages come in whole pages and with cpu or memory.

Koordinator's percentage resources are extended resources like any other; their "must be an
integer" message also says what the number counts, because `koordinator.sh/gpu-core: 12.5` is an
easy mistake to make when one means 12.5 % of a GPU.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from apis.errors import QuantityError
from apis.extension import devicetypes, names
from apis.k8s import quantity
from apiserver.errors import Cause
from apiserver.validation import qualified_name

__all__ = ["validate_pod", "validate_requirements"]

_NATIVE_DOMAIN: Final = "kubernetes.io/"
_QUOTA_REQUESTS_PREFIX: Final = "requests."
_HUGEPAGES_PREFIX: Final = "hugepages-"
_QOS_RESOURCES: Final = frozenset({names.CPU, names.MEMORY})
_CONTAINER_RESOURCES: Final = frozenset({names.CPU, names.MEMORY, names.EPHEMERAL_STORAGE})
#: Names kube knows without a domain (its `standardResources`, mostly for quotas).
_STANDARD_RESOURCES: Final = _CONTAINER_RESOURCES | frozenset(
    {
        *(f"{scope}.{r}" for scope in ("requests", "limits") for r in _CONTAINER_RESOURCES),
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
    }
)
#: Koordinator's resources counted in percent of one device.
_PERCENT_RESOURCES: Final = devicetypes.PERCENT_RESOURCES
_QUANTITY_SYNTAX: Final = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
NOT_INTEGER: Final = "must be an integer"
NEGATIVE: Final = "must be greater than or equal to 0"
NO_LIMIT: Final = "Limit must be set for non overcommitable resources"


def _is_native(name: str) -> bool:
    """No domain, or kube's own (`kubernetes.io/gpu-core` is native, so neither integer-checked
    nor held to request = limit)."""
    return "/" not in name or _NATIVE_DOMAIN in name


def _is_extended(name: str) -> bool:
    return (
        not _is_native(name)
        and not name.startswith(_QUOTA_REQUESTS_PREFIX)
        and not qualified_name(_QUOTA_REQUESTS_PREFIX + name)
    )


def _overcommit_allowed(name: str) -> bool:
    """May the request be below the limit? Only for native resources other than hugepages."""
    return _is_native(name) and not name.startswith(_HUGEPAGES_PREFIX)


@dataclass(frozen=True, slots=True)
class _Name:
    """What kube makes of a resource name."""

    #: Why the name is invalid: the detail of one Invalid cause each (kube's validateContainerResourceName).
    problems: tuple[str, ...]
    extended: bool
    overcommit: bool
    hugepages: bool


@functools.lru_cache(maxsize=1024)
def _name(name: str) -> _Name:
    # Cached, as `_value`: pods repeat the same few names and quantities, and checking them costs
    # tens of microseconds a pod (regular expressions, exact rationals) against ~1 µs from the cache.
    problems = [why] if (why := qualified_name(name)) else []
    if "/" not in name:
        if not problems and name not in _STANDARD_RESOURCES and not name.startswith(_HUGEPAGES_PREFIX):
            problems.append("must be a standard resource type or fully qualified")
        if name not in _CONTAINER_RESOURCES and not name.startswith(_HUGEPAGES_PREFIX):
            problems.append("must be a standard resource for containers")
    elif not _is_native(name) and not _is_extended(name):
        problems.append("doesn't follow extended resource name standard")
    return _Name(tuple(problems), _is_extended(name), _overcommit_allowed(name), name.startswith(_HUGEPAGES_PREFIX))


@dataclass(frozen=True, slots=True)
class _Value:
    """A quantity and what is wrong with it for its resource: the detail of one Invalid cause each
    (kube's ValidateResourceQuantityValue, and whole hugepages)."""

    quantity: quantity.Quantity
    problems: tuple[str, ...]


@functools.lru_cache(maxsize=4096, typed=True)
def _value(name: str, raw: str | int | float) -> _Value:
    """Raises QuantityError when `raw` is not a quantity."""
    value = quantity.parse(raw)
    kind = _name(name)
    problems = []
    if value.amount < 0:
        problems.append(NEGATIVE)
    if kind.extended and value.milli_value() % 1000:
        problems.append(_not_integer(name))
    if kind.hugepages and not _whole_pages(name, value):
        problems.append(f"{value} is not positive integer multiple of {name}")
    return _Value(value, tuple(problems))


def _not_integer(name: str) -> str:
    if name in _PERCENT_RESOURCES:
        return f"{NOT_INTEGER} ({name} is a whole percent of one device: 100 = a whole device)"
    return NOT_INTEGER


def _whole_pages(name: str, value: quantity.Quantity) -> bool:
    try:
        page = quantity.parse(name.removeprefix(_HUGEPAGES_PREFIX))
    except QuantityError:
        return False
    if page.amount <= 0 or page.milli_value() % 1000:
        return False
    return value.value() % page.value() == 0


def _values(raw: object, path: str, causes: list[Cause]) -> dict[str, _Value]:
    """The quantities of a ResourceList, checked; what does not parse becomes a cause."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        causes.append(Cause(path, "must be a map of resource names to quantities", "FieldValueTypeInvalid"))
        return {}
    out: dict[str, _Value] = {}
    for name, value in raw.items():
        try:
            if not isinstance(value, (str, int, float)):  # the tuple is the faster check
                raise QuantityError(value, "not a scalar")
            out[name] = _value(name, value)
        except QuantityError:
            shown = value if isinstance(value, str) else str(value)
            causes.append(Cause.invalid(f"{path}[{name}]", shown, _QUANTITY_SYNTAX))
    return out


def _checks(name: str, value: _Value, path: str) -> list[Cause]:
    """The causes against one name and its quantity (`path`: `...limits[nvidia.com/gpu]`)."""
    if not value.problems and not _name(name).problems:
        return []
    shown = str(value.quantity)
    return [Cause.invalid(path, name, why) for why in _name(name).problems] + [
        Cause.invalid(path, shown, why) for why in value.problems
    ]


def validate_requirements(raw: object, path: str) -> list[Cause]:
    """Problems with one ResourceRequirements (`path`: `spec.containers[0].resources`), in kube's
    order: limits, then requests, each by name. Pure; never raises."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        return [Cause(path, "must be an object", "FieldValueTypeInvalid")]
    causes: list[Cause] = []
    lim_path, req_path = f"{path}.limits", f"{path}.requests"
    limits = _values(raw.get("limits"), lim_path, causes)
    requests = _values(raw.get("requests"), req_path, causes)
    for name in sorted(limits):
        causes += _checks(name, limits[name], f"{lim_path}[{name}]")
    for name in sorted(requests):
        causes += _checks(name, requests[name], f"{req_path}[{name}]")
        limit_value = limits.get(name)
        if limit_value is None:
            if not _name(name).overcommit:
                causes.append(Cause.required(lim_path, NO_LIMIT))
            continue
        if limit_value is requests[name]:
            continue  # the same text (cached), so the same quantity
        request, limit = requests[name].quantity, limit_value.quantity
        if request != limit and not _name(name).overcommit:
            causes.append(Cause.invalid(req_path, str(request), f"must be equal to {name} limit of {limit}"))
        elif request > limit:
            causes.append(
                Cause.invalid(req_path, str(request), f"must be less than or equal to {name} limit of {limit}")
            )
    asked = limits.keys() | requests.keys()
    if any(_name(n).hugepages for n in asked) and not asked & _QOS_RESOURCES:
        causes.append(Cause.forbidden(path, "HugePages require cpu or memory"))
    return causes


def validate_pod(spec: Mapping[str, Any]) -> list[Cause]:
    """Problems with the resources of every container and init container, and the overhead."""
    causes: list[Cause] = []
    for field in ("containers", "initContainers"):
        containers = spec.get(field)
        for i, c in enumerate(containers if isinstance(containers, list) else ()):
            if isinstance(c, dict):
                causes += validate_requirements(c.get("resources"), f"spec.{field}[{i}].resources")
    if spec.get("overhead") is not None:
        causes += validate_requirements({"limits": spec["overhead"]}, "spec.overhead")
    return causes
