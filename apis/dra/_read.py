"""Readers shared by the DRA parsers: quantities, quantity maps, qualified names, enums.

Each names the field path it read in its ValidationError, as `apis._fields` does for plain JSON
types, so a broken slice or claim is reported as `spec.devices[3].capacity.memory: ...` rather
than a crash inside the allocator.
"""

from __future__ import annotations

from collections.abc import Mapping

from apis import _fields as f
from apis.errors import QuantityError, ValidationError
from apis.k8s import quantity
from apis.k8s.quantity import Quantity


def qty(raw: object, path: str, obj: str) -> Quantity:
    if isinstance(raw, bool) or raw is None:
        raise ValidationError(path, f"expected a quantity, got {raw!r}", obj=obj)
    try:
        return quantity.parse(raw)
    except QuantityError as e:
        raise ValidationError(path, e.reason, obj=obj) from None


def optional_qty(d: f.JSON, key: str, path: str, obj: str) -> Quantity | None:
    raw = d.get(key)
    return None if raw is None else qty(raw, f"{path}.{key}", obj)


def qty_map(d: f.JSON, key: str, path: str, obj: str) -> dict[str, Quantity]:
    raw = f.mapping(d.get(key), f"{path}.{key}", obj)
    out: dict[str, Quantity] = {}
    for name in sorted(raw):
        qualified_name(name, f"{path}.{key}", obj)
        out[name] = qty(raw[name], f"{path}.{key}.{name}", obj)
    return out


def qualified_name(name: object, path: str, obj: str) -> str:
    """A QualifiedName: `<id>` or `<domain>/<id>`, both parts non-empty."""
    if not isinstance(name, str) or not name:
        raise ValidationError(path, f"expected a non-empty name, got {name!r}", obj=obj)
    domain, sep, ident = name.partition("/")
    if sep and (not domain or not ident or "/" in ident):
        raise ValidationError(path, f"{name!r} is not <id> or <domain>/<id>", obj=obj)
    return name


def fully_qualified_name(name: object, path: str, obj: str) -> str:
    """A FullyQualifiedName: `<domain>/<id>`, the domain required."""
    qualified_name(name, path, obj)
    assert isinstance(name, str)
    if "/" not in name:
        raise ValidationError(path, f"{name!r} must include a domain (<domain>/<id>)", obj=obj)
    return name


def choice(d: f.JSON, key: str, path: str, obj: str, *, allowed: tuple[str, ...], default: str) -> str:
    value = f.string(d, key, path, obj, default) or default
    if value not in allowed:
        raise ValidationError(f"{path}.{key}", f"must be one of {', '.join(allowed)}, got {value!r}", obj=obj)
    return value


def required_string(d: f.JSON, key: str, path: str, obj: str) -> str:
    value = f.string(d, key, path, obj)
    if not value:
        raise ValidationError(f"{path}.{key}", "required", obj=obj)
    return value


def qty_map_dict(values: Mapping[str, Quantity]) -> dict[str, str]:
    return {name: str(values[name]) for name in sorted(values)}
