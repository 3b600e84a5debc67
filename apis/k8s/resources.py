"""Resource lists as integers in base units, and their arithmetic.

A Kubernetes ResourceList maps names to quantity strings. Past the parse boundary Tessera keeps
it as `dict[str, int]` in base units — milli-CPU for `cpu`, bytes for memory-like names, plain
counts or percent (100 = one device) for the rest — because integers are exact, fast and easy to
compare. These helpers are plain functions over such mappings; they never mutate their inputs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction

from apis.errors import QuantityError, ValidationError
from apis.extension import devicetypes, names
from apis.k8s import quantity

__all__ = [
    "ResourceList",
    "add",
    "format_list",
    "format_quantity",
    "insufficient",
    "is_zero",
    "max_of",
    "parse_list",
    "scale",
    "sub",
    "sum_of",
    "to_int",
]

#: Read-only view of a resource list in base units.
ResourceList = Mapping[str, int]


# Whole numbers with an exact integer suffix ("8", "16Gi", "2k") are most of what objects carry;
# they skip the general (exact rational) parser, which costs ten times more.
#: Names measured in bytes (formatted as BinarySI, `16Gi`): Kubernetes' and the devices'.
_BYTES = names.BYTE_RESOURCES | devicetypes.BYTE_RESOURCES
_WHOLE = re.compile(r"([0-9]{1,18})(|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)")
_WHOLE_SCALE = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18} | {
    suffix: 1 << (10 * (i + 1)) for i, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))
}


def to_int(name: str, value: object) -> int:
    """Parse one quantity into the base unit of `name` (milli for CPU). Raises QuantityError."""
    milli = name in names.MILLI_RESOURCES
    if isinstance(value, str) and (m := _WHOLE.fullmatch(value)):
        whole = int(m.group(1)) * _WHOLE_SCALE[m.group(2)]
        return whole * 1000 if milli else whole
    if milli and isinstance(value, str) and value.endswith("m") and value[:-1].isascii() and value[:-1].isdigit():
        return int(value[:-1])
    parsed = quantity.parse(value)
    return parsed.milli_value() if milli else parsed.value()


def parse_list(raw: object, *, field: str = "resources", obj: str = "") -> dict[str, int]:
    """Parse a ResourceList from Kubernetes JSON; `None` is empty. Raises ValidationError."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValidationError(field, f"expected a map of quantities, got {type(raw).__name__}", obj=obj)
    parsed: dict[str, int] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not name:
            raise ValidationError(field, f"resource name {name!r} is not a non-empty string", obj=obj)
        try:
            parsed[name] = to_int(name, value)
        except QuantityError as e:
            raise ValidationError(f"{field}[{name}]", e.reason + f" (got {value!r})", obj=obj) from e
    return parsed


@functools.lru_cache(maxsize=4096)
def format_quantity(name: str, amount: int) -> str:
    """Canonical quantity string for an amount in `name`'s base unit (`1500m`, `16Gi`, `50`).

    Memoised: the scheduler writes the same few amounts into every device-allocated annotation,
    and exact formatting (via Fraction) costs tens of microseconds per call.
    """
    if name in names.MILLI_RESOURCES:
        return str(quantity.Quantity(Fraction(amount, 1000), quantity.Format.DECIMAL_SI))
    fmt = quantity.Format.BINARY_SI if name in _BYTES else quantity.Format.DECIMAL_SI
    return str(quantity.Quantity(Fraction(amount), fmt))


def format_list(resources: ResourceList) -> dict[str, str]:
    """Kubernetes JSON for a resource list: keys sorted, quantities as canonical strings."""
    return {name: format_quantity(name, resources[name]) for name in sorted(resources)}


def add(a: ResourceList, b: ResourceList) -> dict[str, int]:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) + amount
    return out


def sub(a: ResourceList, b: ResourceList) -> dict[str, int]:
    """a − b per name; names only in b come out negative (callers decide if that is an error)."""
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) - amount
    return out


def sum_of(lists: Iterable[ResourceList]) -> dict[str, int]:
    out: dict[str, int] = {}
    for resources in lists:
        for name, amount in resources.items():
            out[name] = out.get(name, 0) + amount
    return out


def max_of(a: ResourceList, b: ResourceList) -> dict[str, int]:
    out = dict(a)
    for name, amount in b.items():
        if amount > out.get(name, 0):
            out[name] = amount
    return out


def scale(resources: ResourceList, factor: int) -> dict[str, int]:
    return {name: amount * factor for name, amount in resources.items()}


def insufficient(request: ResourceList, free: ResourceList) -> list[str]:
    """Names whose requested amount exceeds what is free (missing = 0), sorted. Empty means fits."""
    return sorted(name for name, amount in request.items() if amount > 0 and amount > free.get(name, 0))


def is_zero(resources: ResourceList) -> bool:
    return all(amount == 0 for amount in resources.values())
