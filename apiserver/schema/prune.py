"""Pruning and defaulting: what kube-apiserver does to a custom resource before validating it.

Pruning drops every field the structural schema does not specify (unless a node says
`x-kubernetes-preserve-unknown-fields`), so a client's typo is not stored as if it meant
something; the dropped paths are returned so `fieldValidation=Strict|Warn` can report them.
Defaulting fills `default`s of absent fields (and of fields that are null but not nullable), and
non-nullable nulls without a default are dropped, in that order, as apiextensions-apiserver does.
"""

from __future__ import annotations

import copy
from typing import Any

from apiserver.schema.structural import Structural

__all__ = ["apply_defaults", "prune"]

_ROOT_KEEP = frozenset({"apiVersion", "kind", "metadata"})


def prune(schema: Structural, value: Any, path: str = "", *, root: bool = True) -> list[str]:
    """Remove unknown fields from `value` in place; returns their paths (`spec.foo`)."""
    removed: list[str] = []
    _prune(schema, value, path, root, removed)
    return removed


def _prune(schema: Structural, value: Any, path: str, keep_meta: bool, removed: list[str]) -> None:
    if isinstance(value, dict):
        for key in list(value):
            child = f"{path}.{key}" if path else key
            if keep_meta and key in _ROOT_KEEP:
                continue
            sub = schema.properties.get(key)
            if sub is None and isinstance(schema.additional, Structural):
                _prune(schema.additional, value[key], f"{path}[{key}]", False, removed)
                continue
            if sub is None:
                if not schema.preserve_unknown and schema.additional is not True:
                    del value[key]
                    removed.append(child)
                continue
            _prune(sub, value[key], child, sub.embedded_resource, removed)
    elif isinstance(value, list) and schema.items is not None:
        for i, item in enumerate(value):
            _prune(schema.items, item, f"{path}[{i}]", schema.items.embedded_resource, removed)


def apply_defaults(schema: Structural, value: Any) -> None:
    """Fill defaults in place, depth first (a defaulted object gets its own fields' defaults)."""
    if isinstance(value, dict):
        for key, sub in schema.properties.items():
            if sub.has_default and (key not in value or (value[key] is None and not sub.nullable)):
                value[key] = copy.deepcopy(sub.default)
            elif key in value and value[key] is None and not sub.nullable:
                del value[key]
        for key, item in value.items():
            child = schema.properties.get(key)
            if child is None and isinstance(schema.additional, Structural):
                child = schema.additional
            if child is not None:
                apply_defaults(child, item)
    elif isinstance(value, list) and schema.items is not None:
        for item in value:
            apply_defaults(schema.items, item)
