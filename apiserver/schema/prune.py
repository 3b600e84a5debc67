"""Pruning and defaulting: what kube-apiserver does to a custom resource before validating it.

Pruning drops every field the structural schema does not specify (unless a node says
`x-kubernetes-preserve-unknown-fields`), so a client's typo is not stored as if it meant
something; the dropped paths are returned so `fieldValidation=Strict|Warn` can report them.
Defaulting fills `default`s of absent fields (and of fields that are null but not nullable), and
non-nullable nulls without a default are dropped, in that order, as apiextensions-apiserver does.

A built-in kind's body takes the same walk against its Kubernetes definition (`decode`), which
also does what kube's decoding into Go types does: every known field's JSON type checked
(`gotypes`: a wrong one is a 400 before anything is stored) and nulls read as absent. A custom
resource's types are checked by validation instead (`validate.py`, 422), as apiextensions does.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from apiserver.schema import gotypes
from apiserver.schema.structural import Structural

__all__ = ["apply_defaults", "decode", "prune"]

_ROOT_KEEP = frozenset({"apiVersion", "kind", "metadata"})


def prune(schema: Structural, value: Any, path: str = "", *, root: bool = True) -> list[str]:
    """Remove unknown fields from `value` in place; returns their paths (`spec.foo`)."""
    walk = _Walk(typed=False)
    _prune(schema, value, path, root, walk)
    return walk.removed


def decode(schema: Structural, value: Any) -> list[str]:
    """A built-in kind's body as kube-apiserver's decoder takes it into the Go types, in the same
    walk as pruning: unknown fields removed (their paths returned), a null field removed (Go reads
    it as absent) and a null map value or list item made Go's zero value, every known field's JSON
    type checked (`gotypes`). Raises `gotypes.DecodeError` with the error Go's decoder returns:
    the first fatal one, else the first mismatch; `value` is then partly pruned."""
    walk = _Walk(typed=True)
    _prune(schema, value, "", False, walk)
    if walk.mismatch:
        raise gotypes.DecodeError(walk.mismatch)
    return walk.removed


@dataclasses.dataclass(slots=True)
class _Walk:
    """One walk's findings; `typed` walks also decode (built-in kinds)."""

    typed: bool
    removed: list[str] = dataclasses.field(default_factory=list)
    mismatch: str = ""

    def refuse(self, refusal: gotypes.Refusal, owner: Structural | None, field: str) -> None:
        owner_name = owner.definition.rpartition(".")[2] if owner is not None else ""
        message = refusal.message(owner_name, field)
        if refusal.fatal:
            raise gotypes.DecodeError(message)
        if not self.mismatch:
            self.mismatch = message


def _prune(
    schema: Structural,
    value: Any,
    path: str,
    keep_meta: bool,
    walk: _Walk,
    *,
    owner: Structural | None = None,
    field: str = "",
) -> None:
    """Prune (and, typed, decode) the fields of an object or the items of a list, in place.
    `owner` is the struct that holds the last named field and `field` the named fields from the
    root: Go's names for where a value is, in its errors (only typed walks use them). A value is
    checked by its parent, so a leaf costs no call of its own and no path is built for it."""
    typed = walk.typed
    if isinstance(value, dict):
        properties, additional = schema.properties, schema.additional
        for key in list(value):
            if keep_meta and key in _ROOT_KEEP:
                continue
            item = value[key]
            sub = properties.get(key)
            if sub is not None:
                if typed:
                    if item is None:  # Go reads null as absent
                        del value[key]
                        continue
                    if (refused := gotypes.refusal(sub, item)) is not None:
                        walk.refuse(refused, schema, f"{field}.{key}" if field else key)
                        continue
                if isinstance(item, (dict, list)):  # the tuple is the faster check
                    named = f"{field}.{key}" if field else key
                    child = f"{path}.{key}" if path else key
                    _prune(sub, item, child, sub.embedded_resource, walk, owner=schema, field=named)
            elif isinstance(additional, Structural):
                if typed:
                    if item is None:
                        value[key] = item = gotypes.zero(additional)
                    if item is not None and (refused := gotypes.refusal(additional, item)) is not None:
                        walk.refuse(refused, owner, field)
                        continue
                if isinstance(item, (dict, list)):  # the tuple is the faster check
                    _prune(additional, item, f"{path}[{key}]", False, walk, owner=owner, field=field)
            elif not schema.preserve_unknown and additional is not True:
                del value[key]
                walk.removed.append(f"{path}.{key}" if path else key)
    elif isinstance(value, list) and schema.items is not None:
        items = schema.items
        for i, item in enumerate(value):
            current = item
            if typed:
                if current is None:
                    value[i] = current = gotypes.zero(items)
                if current is not None and (refused := gotypes.refusal(items, current)) is not None:
                    walk.refuse(refused, owner, field)
                    continue
            if isinstance(current, (dict, list)):
                _prune(items, current, f"{path}[{i}]", items.embedded_resource, walk, owner=owner, field=field)


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
