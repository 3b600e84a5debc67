"""A CRD's `openAPIV3Schema`, compiled once into a tree the request path walks.

kube-apiserver requires CRD schemas to be *structural* (every field has a type, given in the
properties/items/additionalProperties tree rather than only under anyOf/allOf/oneOf/not) and uses
that tree for three things: pruning unknown fields, applying defaults and validating values. The
`Structural` node holds what those need; value-only constraints under the logical junctors are
kept as compiled sub-schemas and only checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SchemaError", "Structural", "compile_schema"]

_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_JUNCTORS = ("anyOf", "allOf", "oneOf")


class SchemaError(ValueError):
    """The schema itself is not acceptable; `path` names where (`openAPIV3Schema.properties[spec]`)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


_NOTHING: Any = object()


@dataclass(frozen=True, slots=True, eq=False)
class Structural:
    """One node of a structural schema. `type` is "" only where an x-kubernetes marker allows it."""

    type: str = ""
    description: str = ""
    format: str = ""
    properties: Mapping[str, Structural] = field(default_factory=dict)
    #: `additionalProperties`: a schema for every other key; `True` allows any value.
    additional: Structural | bool | None = None
    items: Structural | None = None
    required: tuple[str, ...] = ()
    enum: tuple[Any, ...] = ()
    nullable: bool = False
    default: Any = _NOTHING
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None
    min_properties: int | None = None
    max_properties: int | None = None
    unique_items: bool = False
    pattern: re.Pattern[str] | None = None
    preserve_unknown: bool = False
    int_or_string: bool = False
    embedded_resource: bool = False
    list_type: str = ""
    list_map_keys: tuple[str, ...] = ()
    any_of: tuple[Structural, ...] = ()
    all_of: tuple[Structural, ...] = ()
    one_of: tuple[Structural, ...] = ()
    not_: Structural | None = None
    #: The schema as written (for OpenAPI publication).
    raw: Mapping[str, Any] = field(default_factory=dict)
    #: The named definition this node is (`io.k8s.api.core.v1.PodSpec`); "" in a CRD's schema.
    #: Built-in kinds' decoding (`gotypes`) names Go types by it and knows Quantity by it.
    definition: str = ""

    @property
    def has_default(self) -> bool:
        return self.default is not _NOTHING


def _number(raw: Mapping[str, Any], key: str, path: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SchemaError(f"{path}.{key}", f"must be a number, got {value!r}")
    return value


def _count(raw: Mapping[str, Any], key: str, path: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SchemaError(f"{path}.{key}", f"must be a non-negative integer, got {value!r}")
    return value


def _pattern(raw: Mapping[str, Any], path: str) -> re.Pattern[str] | None:
    text = raw.get("pattern")
    if text is None:
        return None
    if not isinstance(text, str):
        raise SchemaError(f"{path}.pattern", "must be a string")
    try:
        return re.compile(text)
    except re.error as e:
        raise SchemaError(f"{path}.pattern", f"must be a valid regular expression: {e}") from None


def compile_schema(
    raw: Any,
    path: str = "openAPIV3Schema",
    *,
    structural: bool = True,
    int_or_string: bool = False,
    refs: Callable[[str], Structural] | None = None,
    definition: str = "",
) -> Structural:
    """Compile (and check) one schema; `structural=False` inside anyOf/allOf/oneOf/not, where
    kube-apiserver forbids types and defaults but allows value constraints (and, under
    `x-kubernetes-int-or-string`, the types integer and string). `refs` resolves `$ref`s in
    properties, items and additionalProperties (built-in kinds' definitions, `builtin.py`); CRD
    schemas may not use them, so without it a `$ref` is a node without a type. `definition` names
    the definition `raw` is (built-in kinds)."""
    if not isinstance(raw, Mapping):
        raise SchemaError(path, "must be an object")
    if refs is not None and isinstance(raw.get("$ref"), str):
        return refs(raw["$ref"])
    kind = raw.get("type", "")
    if kind and kind not in _TYPES:
        raise SchemaError(f"{path}.type", f"Unsupported value: {kind!r}")
    preserve = raw.get("x-kubernetes-preserve-unknown-fields") is True
    int_or_string_here = raw.get("x-kubernetes-int-or-string") is True
    embedded = raw.get("x-kubernetes-embedded-resource") is True
    if structural and not kind and not (preserve or int_or_string_here):
        raise SchemaError(f"{path}.type", "Required value: must not be empty for specified object fields")
    if not structural and ("default" in raw or (kind and not (int_or_string and kind in ("integer", "string")))):
        raise SchemaError(path, "Forbidden: must not specify type or default inside anyOf/allOf/oneOf/not")
    props_raw = raw.get("properties") or {}
    if not isinstance(props_raw, Mapping):
        raise SchemaError(f"{path}.properties", "must be an object")
    properties = {
        str(name): compile_schema(sub, f"{path}.properties[{name}]", structural=structural, refs=refs)
        for name, sub in props_raw.items()
    }
    additional: Structural | bool | None = None
    extra = raw.get("additionalProperties")
    if isinstance(extra, bool):
        additional = extra
    elif extra is not None:
        if properties:
            raise SchemaError(
                f"{path}.additionalProperties", "Forbidden: additionalProperties and properties are mutual exclusive"
            )
        additional = compile_schema(extra, f"{path}.additionalProperties", structural=structural, refs=refs)
    items = None
    if raw.get("items") is not None:
        items = compile_schema(raw["items"], f"{path}.items", structural=structural, refs=refs)
    elif structural and kind == "array":
        raise SchemaError(f"{path}.items", "Required value: must be specified")
    required = raw.get("required") or ()
    enum = raw.get("enum") or ()
    if not isinstance(required, list | tuple) or not all(isinstance(r, str) for r in required):
        raise SchemaError(f"{path}.required", "must be a list of strings")
    if not isinstance(enum, list | tuple):
        raise SchemaError(f"{path}.enum", "must be a list")
    keys = raw.get("x-kubernetes-list-map-keys") or ()
    return Structural(
        type=str(kind),
        description=str(raw.get("description", "")),
        format=str(raw.get("format", "")),
        properties=properties,
        additional=additional,
        items=items,
        required=tuple(required),
        enum=tuple(enum),
        nullable=raw.get("nullable") is True,
        default=raw.get("default", _NOTHING),
        minimum=_number(raw, "minimum", path),
        maximum=_number(raw, "maximum", path),
        exclusive_minimum=raw.get("exclusiveMinimum") is True,
        exclusive_maximum=raw.get("exclusiveMaximum") is True,
        min_length=_count(raw, "minLength", path),
        max_length=_count(raw, "maxLength", path),
        min_items=_count(raw, "minItems", path),
        max_items=_count(raw, "maxItems", path),
        min_properties=_count(raw, "minProperties", path),
        max_properties=_count(raw, "maxProperties", path),
        unique_items=raw.get("uniqueItems") is True,
        pattern=_pattern(raw, path),
        preserve_unknown=preserve,
        int_or_string=int_or_string_here,
        embedded_resource=embedded,
        list_type=str(raw.get("x-kubernetes-list-type", "")),
        list_map_keys=tuple(str(k) for k in keys),
        any_of=_junctor(raw, "anyOf", path, int_or_string_here),
        all_of=_junctor(raw, "allOf", path, int_or_string_here),
        one_of=_junctor(raw, "oneOf", path, int_or_string_here),
        not_=compile_schema(raw["not"], f"{path}.not", structural=False) if raw.get("not") is not None else None,
        raw=raw,
        definition=definition,
    )


def _junctor(raw: Mapping[str, Any], key: str, path: str, int_or_string: bool) -> tuple[Structural, ...]:
    subs = raw.get(key)
    if subs is None:
        return ()
    if not isinstance(subs, list):
        raise SchemaError(f"{path}.{key}", "must be a list")
    return tuple(
        compile_schema(s, f"{path}.{key}[{i}]", structural=False, int_or_string=int_or_string)
        for i, s in enumerate(subs)
    )
