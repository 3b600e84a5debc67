"""The field checks the four resource.k8s.io kinds share, as kube-apiserver words them.

Names (drivers, pools, devices, requests, qualified attribute names), lists with a size limit
and unique keys, device selectors (CEL) and opaque driver configuration: DeviceClasses, claims,
claim templates and ResourceSlices use the same rules, so they are written once. The limits are
Kubernetes' (k8s.io/api/resource/v1's constants). Each check returns `Cause`s, never raises.

CEL expressions are compiled here with the scheduler's compiler (`apis.dra.cel`, cached by text),
so one that does not compile is refused on write with the compiler's reason, as kube-apiserver
refuses it; what fails only at run time (a bad quantity, the iteration budget) is the
scheduler's to report on the claim.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Final, TypeVar

from apis.dra import cel as dracel
from apiserver.errors import Cause
from apiserver.validation import dns_label, dns_subdomain

__all__ = [
    "CEL_MAX_LENGTH",
    "DEVICE_CONFIG_MAX",
    "DEVICE_REQUESTS_MAX",
    "DEVICE_SELECTORS_MAX",
    "bounded",
    "device_configuration",
    "driver_name",
    "fully_qualified_name",
    "go",
    "label",
    "mapping",
    "objects",
    "pool_name",
    "qualified_name",
    "selectors",
    "subdomain",
    "unique",
]

T = TypeVar("T")

DEVICE_REQUESTS_MAX: Final = 32
DEVICE_SELECTORS_MAX: Final = 32
DEVICE_CONFIG_MAX: Final = 32
CEL_MAX_LENGTH: Final = 10 * 1024
OPAQUE_PARAMETERS_MAX: Final = 10 * 1024
DRIVER_NAME_MAX: Final = 63
POOL_NAME_MAX: Final = 253
DEVICE_DOMAIN_MAX: Final = 63
DEVICE_ID_MAX: Final = 32
_C_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def go(value: object) -> str:
    """A value as kube-apiserver quotes it in a message (JSON is Go's %q for strings)."""
    return json.dumps(value, separators=(",", ":"))


def objects(value: Any) -> list[Any]:
    """A list field as a list (anything else: empty; the decoder has refused wrong JSON types)."""
    return value if isinstance(value, list) else []


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def label(value: Any, path: str) -> list[Cause]:
    """A required DNS-1123 label (device and request names)."""
    if not isinstance(value, str) or not value:
        return [Cause.required(path)]
    why = dns_label(value)
    return [Cause.invalid(path, value, why)] if why else []


def subdomain(value: Any, path: str) -> list[Cause]:
    """A required DNS-1123 subdomain (DeviceClass names a request refers to)."""
    if not isinstance(value, str) or not value:
        return [Cause.required(path)]
    why = dns_subdomain(value)
    return [Cause.invalid(path, value, why)] if why else []


def driver_name(value: Any, path: str) -> list[Cause]:
    """A driver's name: kube's rule for CSI driver names (at most 63 characters, a DNS subdomain)."""
    if not isinstance(value, str) or not value:
        return [Cause.required(path)]
    causes = []
    if len(value) > DRIVER_NAME_MAX:
        causes.append(Cause.too_long(path, DRIVER_NAME_MAX))
    if dns_subdomain(value.lower()):
        causes.append(Cause.invalid(path, value, dns_subdomain(value.lower())))
    return causes


def pool_name(value: Any, path: str) -> list[Cause]:
    """A pool's name: DNS subdomains joined by '/', at most 253 characters."""
    if not isinstance(value, str) or not value:
        return [Cause.required(path)]
    causes = [Cause.too_long(path, POOL_NAME_MAX)] if len(value) > POOL_NAME_MAX else []
    causes += [Cause.invalid(path, part, dns_subdomain(part)) for part in value.split("/") if dns_subdomain(part)]
    return causes


def _c_identifier(value: str, path: str) -> list[Cause]:
    if len(value) > DEVICE_ID_MAX:
        return [Cause.too_long(path, DEVICE_ID_MAX)]
    if not _C_IDENTIFIER.fullmatch(value):
        return [
            Cause.invalid(
                path,
                value,
                "a valid C identifier must start with alphabetic character or '_', followed by a string of "
                "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
                "validation is '[A-Za-z_][A-Za-z0-9_]*')",
            )
        ]
    return []


def qualified_name(value: Any, path: str) -> list[Cause]:
    """An attribute or capacity name: `<domain>/<C identifier>` or a bare C identifier."""
    if not isinstance(value, str) or not value:
        return [Cause.required(path, "name required")]
    parts = value.split("/")
    if len(parts) == 1:
        return _c_identifier(value, path)
    if len(parts) > 2:
        return [Cause.invalid(path, value, "must be either '<domain>/<name>' or '<name>'")]
    domain, name = parts
    causes = []
    if not domain:
        causes.append(Cause.required(path, "the domain must not be empty"))
    elif len(domain) > DEVICE_DOMAIN_MAX:
        causes.append(Cause.too_long(path, DEVICE_DOMAIN_MAX))
    elif dns_subdomain(domain):
        causes.append(Cause.invalid(path, domain, dns_subdomain(domain)))
    if not name:
        causes.append(Cause.required(path, "the name must not be empty"))
    else:
        causes += _c_identifier(name, path)
    return causes


def fully_qualified_name(value: Any, path: str) -> list[Cause]:
    """A qualified name that must name its domain (`matchAttribute`)."""
    causes = qualified_name(value, path)
    if not causes and "/" not in value:
        causes.append(Cause.invalid(path, value, "must include a domain"))
    return causes


def bounded(items: Sequence[Any], limit: int, path: str) -> list[Cause]:
    return [Cause.too_many(path, len(items), limit)] if len(items) > limit else []


def unique(items: Sequence[T], key: Callable[[T], Hashable], path: str, *, field: str = "") -> list[Cause]:
    """A `Duplicate value` for each item whose key an earlier item had (`field`: the key's own
    field in the item, named in the path as kube names it; "" for lists of scalars)."""
    seen: set[Hashable] = set()
    causes = []
    for i, item in enumerate(items):
        k = key(item)
        if k is None or k == "":
            continue
        if k in seen:
            causes.append(Cause.duplicate(f"{path}[{i}]{'.' + field if field else ''}", k))
        seen.add(k)
    return causes


def selectors(value: Any, path: str) -> list[Cause]:
    """Device selectors: at most 32, each a CEL expression (present, at most 10 KiB)."""
    items = objects(value)
    causes = bounded(items, DEVICE_SELECTORS_MAX, path)
    for i, selector in enumerate(items):
        cel = mapping(selector).get("cel")
        if not isinstance(cel, Mapping):
            causes.append(Cause.required(f"{path}[{i}].cel"))
            continue
        expression = cel.get("expression")
        where = f"{path}[{i}].cel.expression"
        if not isinstance(expression, str) or not expression.strip():
            causes.append(Cause.required(where, "expression must not be empty"))
        elif len(expression) > CEL_MAX_LENGTH:
            causes.append(Cause.too_long(where, CEL_MAX_LENGTH))
        else:
            try:
                _compiler().compile(expression)
            except dracel.CELCompileError as e:
                causes.append(Cause.invalid(where, expression, e.reason))
    return causes


@functools.cache
def _compiler() -> dracel.Compiler:
    """One compiler for the server's life: its cache keeps each expression's outcome."""
    return dracel.Compiler()


def device_configuration(config: Mapping[str, Any], path: str) -> list[Cause]:
    """One configuration entry's `opaque` part: a driver and its parameters (any JSON object, at
    most 10 KiB encoded)."""
    opaque = config.get("opaque")
    if not isinstance(opaque, Mapping):
        return [Cause.required(f"{path}.opaque")]
    causes = driver_name(opaque.get("driver"), f"{path}.opaque.driver")
    parameters = opaque.get("parameters")
    if parameters is None:
        causes.append(Cause.required(f"{path}.opaque.parameters"))
    elif len(go(parameters)) > OPAQUE_PARAMETERS_MAX:
        causes.append(Cause.too_long(f"{path}.opaque.parameters", OPAQUE_PARAMETERS_MAX))
    return causes
