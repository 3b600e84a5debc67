"""Validating a custom resource's value against its structural schema, as kube-apiserver does.

Problems are `Cause`s worded as kube-openapi's validator and apiextensions-apiserver word them
(`spec.devices[0].minor: Invalid value: "string": spec.devices[0].minor in body must be of type
integer: "string"`), every problem of the object at once, so one 422 names every bad field.
`metadata`, `apiVersion` and `kind` at the root are the registry's business, not the schema's.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator, Mapping
from typing import Any

from apiserver.errors import Cause
from apiserver.schema.structural import Structural

__all__ = ["validate"]

_ROOT_SKIP = frozenset({"metadata", "apiVersion", "kind"})


def type_name(value: Any) -> str:
    """The JSON type of a value, as kube-openapi names it in messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _show(value: Any) -> str:
    """A value as apimachinery's field errors print it (strings quoted, numbers bare)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) or value is None:
        return "null" if value is None else str(value)
    return json.dumps(value, separators=(",", ":"))


def _invalid(path: str, value: Any, detail: str, reason: str = "FieldValueInvalid") -> Cause:
    return Cause(path, f"Invalid value: {_show(value)}: {detail}", reason)


def _type_invalid(label: str, expected: str, actual: str) -> Cause:
    detail = f'{label} in body must be of type {expected}: "{actual}"'
    return Cause(label, f'Invalid value: "{actual}": {detail}', "FieldValueTypeInvalid")


def _type_ok(kind: str, value: Any) -> bool:
    match kind:
        case "object":
            return isinstance(value, dict)
        case "array":
            return isinstance(value, list)
        case "string":
            return isinstance(value, str)
        case "boolean":
            return isinstance(value, bool)
        case "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        case "number":
            return isinstance(value, int | float) and not isinstance(value, bool)
    return True


def _format_ok(fmt: str, value: str) -> bool:
    if fmt == "date-time":
        try:
            datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return False
        return "T" in value or "t" in value
    if fmt == "date":
        try:
            datetime.date.fromisoformat(value)
        except ValueError:
            return False
    return True


def validate(schema: Structural, value: Any, path: str = "", *, root: bool = True) -> list[Cause]:
    """Every problem of `value` against `schema`; `path` is the field path of `value`."""
    return list(_problems(schema, value, path, root))


def _problems(schema: Structural, value: Any, path: str, root: bool = False) -> Iterator[Cause]:
    label = path or "<root>"
    if value is None:
        if not schema.nullable and (schema.type or schema.int_or_string):
            yield _type_invalid(label, schema.type or "string", "null")
        return
    if schema.int_or_string:
        if not (isinstance(value, str) or _type_ok("integer", value)):
            yield _type_invalid(label, "integer,string", type_name(value))
            return
    elif schema.type and not _type_ok(schema.type, value):
        yield _type_invalid(label, schema.type, type_name(value))
        return
    yield from _value_checks(schema, value, label)
    if isinstance(value, dict):
        yield from _object(schema, value, path, root)
    elif isinstance(value, list):
        yield from _array(schema, value, path)


def _value_checks(schema: Structural, value: Any, label: str) -> Iterator[Cause]:
    if schema.enum and value not in schema.enum:
        allowed = ", ".join(_show(v) for v in schema.enum)
        yield Cause(label, f"Unsupported value: {_show(value)}: supported values: {allowed}", "FieldValueNotSupported")
    if isinstance(value, int | float) and not isinstance(value, bool):
        yield from _bounds(schema, value, label)
    if isinstance(value, str):
        if schema.max_length is not None and len(value) > schema.max_length:
            yield Cause(label, f"Too long: may not be longer than {schema.max_length}", "FieldValueTooLong")
        if schema.min_length is not None and len(value) < schema.min_length:
            yield _invalid(label, value, f"{label} in body should be at least {schema.min_length} chars long")
        if schema.pattern is not None and not schema.pattern.search(value):
            yield _invalid(label, value, f"{label} in body should match '{schema.pattern.pattern}'")
        if schema.format and not _format_ok(schema.format, value):
            yield _invalid(label, value, f"{label} in body must be of type {schema.format}: {_show(value)}")
    for sub in schema.all_of:
        yield from _problems(sub, value, label)
    matches_any = any(not list(_problems(s, value, label)) for s in schema.any_of)
    if schema.any_of and not schema.int_or_string and not matches_any:
        yield _invalid(label, value, f"{label} in body must match at least one schema in anyOf")
    if schema.one_of and sum(1 for s in schema.one_of if not list(_problems(s, value, label))) != 1:
        yield _invalid(label, value, f"{label} in body must match exactly one schema in oneOf")
    if schema.not_ is not None and not list(_problems(schema.not_, value, label)):
        yield _invalid(label, value, f"{label} in body should not match the schema in not")


def _bounds(schema: Structural, value: float, label: str) -> Iterator[Cause]:
    lo, hi = schema.minimum, schema.maximum
    if lo is not None and (value < lo or (schema.exclusive_minimum and value == lo)):
        word = "greater than" if schema.exclusive_minimum else "greater than or equal to"
        yield _invalid(label, value, f"{label} in body should be {word} {_show(lo)}")
    if hi is not None and (value > hi or (schema.exclusive_maximum and value == hi)):
        word = "less than" if schema.exclusive_maximum else "less than or equal to"
        yield _invalid(label, value, f"{label} in body should be {word} {_show(hi)}")


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _object(schema: Structural, value: Mapping[str, Any], path: str, root: bool) -> Iterator[Cause]:
    for name in schema.required:
        if name not in value:
            yield Cause(_child(path, name), "Required value", "FieldValueRequired")
    count, label = len(value), path or "<root>"
    if schema.max_properties is not None and count > schema.max_properties:
        yield Cause(label, f"Too many: {count}: must have at most {schema.max_properties} items", "FieldValueTooMany")
    if schema.min_properties is not None and count < schema.min_properties:
        yield _invalid(label, count, f"{label} in body should have at least {schema.min_properties} properties")
    for key, sub in value.items():
        if root and key in _ROOT_SKIP:
            continue
        prop = schema.properties.get(key)
        if prop is not None:
            yield from _problems(prop, sub, _child(path, key))
        elif isinstance(schema.additional, Structural):
            yield from _problems(schema.additional, sub, f"{path}[{key}]")


def _array(schema: Structural, value: list[Any], path: str) -> Iterator[Cause]:
    count = len(value)
    if schema.max_items is not None and count > schema.max_items:
        yield Cause(path, f"Too many: {count}: must have at most {schema.max_items} items", "FieldValueTooMany")
    if schema.min_items is not None and count < schema.min_items:
        yield _invalid(path, count, f"{path} in body should have at least {schema.min_items} items")
    if schema.items is not None:
        for i, item in enumerate(value):
            yield from _problems(schema.items, item, f"{path}[{i}]")
    yield from _duplicates(schema, value, path)


def _duplicates(schema: Structural, value: list[Any], path: str) -> Iterator[Cause]:
    """`x-kubernetes-list-type: set` / `map` and `uniqueItems`: no two equal items (keys)."""
    if schema.list_type == "map" and schema.list_map_keys:
        seen: set[str] = set()
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key = json.dumps({k: item.get(k) for k in schema.list_map_keys}, sort_keys=True)
            if key in seen:
                yield Cause(f"{path}[{i}]", f"Duplicate value: {key}", "FieldValueDuplicate")
            seen.add(key)
    elif schema.list_type == "set" or schema.unique_items:
        seen_items: set[str] = set()
        for i, item in enumerate(value):
            key = json.dumps(item, sort_keys=True)
            if key in seen_items:
                yield Cause(f"{path}[{i}]", f"Duplicate value: {_show(item)}", "FieldValueDuplicate")
            seen_items.add(key)
