"""Merging an applied configuration into the live object, and the conflicts doing so would cause.

Maps merge key by key; associative lists merge item by item (matched by key); set-like lists
take the union; everything else (scalars, atomic lists) is replaced by the applied value. What
the manager applied last time and no longer applies is removed, unless another manager owns it
too. A field another manager owns is a conflict when the applied value differs; with the same
value the field becomes shared, as structured-merge-diff has it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from apiserver.apply.fields import ListKinds, Path, value_at
from apiserver.schema.structural import Structural

__all__ = ["conflicting", "merge", "path_string", "remove"]


def _child(node: Structural | None, name: str) -> Structural | None:
    if node is None:
        return None
    sub = node.properties.get(name)
    return node.additional if sub is None and isinstance(node.additional, Structural) else sub


def merge(live: Any, applied: Any, lists: ListKinds, name: str = "", node: Structural | None = None) -> Any:
    if isinstance(live, dict) and isinstance(applied, Mapping):
        out = dict(live)
        for key, value in applied.items():
            schema = lists.schema if node is None and not name else _child(node, str(key))
            out[key] = merge(live.get(key), value, lists, str(key), schema)
        return out
    if isinstance(live, list) and isinstance(applied, list):
        keys = lists.keys(name, node)
        items = node.items if node is not None else None
        if keys and all(isinstance(i, Mapping) for i in (*live, *applied)):
            out_items = list(live)
            for item in applied:
                match = [i for i, old in enumerate(out_items) if _has_key(old, {k: item.get(k) for k in keys})]
                if match:
                    out_items[match[0]] = merge(out_items[match[0]], item, lists, "", items)
                else:
                    out_items.append(copy.deepcopy(item))
            return out_items
        if lists.is_set(name, node):
            return [*live, *(v for v in applied if v not in live)]
    return copy.deepcopy(applied)


def remove(obj: Any, path: Path) -> None:
    """Remove the field (or list item, or set member) at `path`, if present."""
    present, parent = value_at(obj, path[:-2] if path[-1] == "." else path[:-1])
    if not present:
        return
    element = path[-2] if path[-1] == "." else path[-1]
    kind, _, text = element.partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(text, None)
    elif kind == "k" and isinstance(parent, list):
        wanted = json.loads(text)
        parent[:] = [
            i for i in parent if not (isinstance(i, Mapping) and all(i.get(k) == v for k, v in wanted.items()))
        ]
    elif kind == "v" and isinstance(parent, list):
        member = json.loads(text)
        parent[:] = [i for i in parent if i != member]


def _has_key(item: Mapping[str, Any], key: Mapping[str, Any]) -> bool:
    return all(item.get(k) == v for k, v in key.items())


def conflicting(path: Path, live: Any, applied: Any) -> bool:
    """Whether applying `applied` changes the field at `path` of `live`."""
    if path[-1] == ".":
        return False  # a list item itself: co-owned; its fields conflict, if any
    return value_at(live, path) != value_at(applied, path)


def path_string(path: Path) -> str:
    """`.spec.containers[name="main"].image`, as kube's conflict messages name fields."""
    out = ""
    for element in path:
        kind, _, text = element.partition(":")
        if kind == "f":
            out += f".{text}"
        elif kind == "k":
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(text).items()) + "]"
        elif kind == "v":
            out += f"[={text}]"
    return out
