"""Typed readers for Kubernetes JSON, used by every `from_dict` in apis/.

Each reader checks the JSON type of one field and raises ValidationError naming the field path,
so a broken object yields one precise message instead of a KeyError or TypeError deep inside.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apis.errors import ValidationError

JSON = Mapping[str, Any]


def mapping(raw: object, field: str, obj: str = "") -> JSON:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValidationError(field, f"expected an object, got {type(raw).__name__}", obj=obj)
    return raw


def string(d: JSON, key: str, field: str, obj: str = "", default: str = "") -> str:
    value = d.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ValidationError(f"{field}.{key}", f"expected a string, got {type(value).__name__}", obj=obj)
    return value


def integer(d: JSON, key: str, field: str, obj: str = "", default: int | None = None) -> int | None:
    value = d.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{field}.{key}", f"expected an integer, got {value!r}", obj=obj)
    return value


def boolean(d: JSON, key: str, field: str, obj: str = "", default: bool = False) -> bool:
    value = d.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValidationError(f"{field}.{key}", f"expected a boolean, got {value!r}", obj=obj)
    return value


def string_map(d: JSON, key: str, field: str, obj: str = "") -> dict[str, str]:
    value = d.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValidationError(f"{field}.{key}", "expected a map of strings to strings", obj=obj)
    return dict(value)


def items(d: JSON, key: str, field: str, obj: str = "") -> Sequence[Any]:
    value = d.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValidationError(f"{field}.{key}", f"expected a list, got {type(value).__name__}", obj=obj)
    return value


def strings(d: JSON, key: str, field: str, obj: str = "") -> tuple[str, ...]:
    values = items(d, key, field, obj)
    if not all(isinstance(v, str) for v in values):
        raise ValidationError(f"{field}.{key}", "expected a list of strings", obj=obj)
    return tuple(values)


def drop_empty(d: dict[str, Any]) -> dict[str, Any]:
    """Omit None, empty maps and empty lists, as Go's `omitempty` does."""
    return {k: v for k, v in d.items() if v is not None and not (isinstance(v, (dict, list, str)) and not v)}
