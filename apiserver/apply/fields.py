"""Field paths, as structured-merge-diff names them, and kube's `fieldsV1` encoding of sets of them.

A path is a tuple of elements: `f:spec` (a field), `k:{"name":"main"}` (the item of an
associative list with that key), `v:"a"` (a member of a set-like list). Lists are associative
where Kubernetes merges them by key (containers by `name`, ...; a CRD's
`x-kubernetes-list-type: map`), sets where it merges them as sets (`finalizers`; `set` in a CRD),
and atomic otherwise: an atomic list, like a scalar, is one leaf owned as a whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from apiserver.patch import KIND_MERGE_KEYS, MERGE_KEYS, SET_LISTS
from apiserver.schema.structural import Structural

__all__ = ["ListKinds", "Path", "decode", "encode", "leaves", "value_at"]

Path = tuple[str, ...]

#: Metadata the server owns, never a manager: not part of any field set.
_SERVER_META = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "managedFields",
        "generateName",
    }
)


@dataclass(frozen=True, slots=True)
class ListKinds:
    """How the lists of one type merge: built-in types by field name, CRDs by their schema."""

    kind: str = ""
    schema: Structural | None = None
    _keys: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def for_type(cls, kind: str, schema: Structural | None) -> ListKinds:
        return cls(kind, schema, {**MERGE_KEYS, **KIND_MERGE_KEYS.get(kind, {})})

    def keys(self, name: str, node: Structural | None) -> tuple[str, ...]:
        if self.schema is not None:
            return node.list_map_keys if node is not None and node.list_type == "map" else ()
        key = self._keys.get(name)
        return (key,) if key else ()

    def is_set(self, name: str, node: Structural | None) -> bool:
        if name in SET_LISTS:
            return True
        return self.schema is not None and node is not None and node.list_type == "set"


def _key(item: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    return "k:" + json.dumps({k: item.get(k) for k in keys}, separators=(",", ":"), sort_keys=True)


def _child_schema(node: Structural | None, name: str) -> Structural | None:
    if node is None:
        return None
    sub = node.properties.get(name)
    if sub is None and isinstance(node.additional, Structural):
        return node.additional
    return sub


def leaves(obj: Mapping[str, Any], lists: ListKinds, *, status: bool = False) -> set[Path]:
    """Every leaf field path `obj` sets; `status=False` leaves status out (its own subresource)."""
    out: set[Path] = set()
    for name, value in obj.items():
        if name in ("apiVersion", "kind") or (name == "status" and not status):
            continue
        sub = _child_schema(lists.schema, name)
        if name == "metadata" and isinstance(value, Mapping):
            for meta_name, meta_value in value.items():
                if meta_name not in _SERVER_META:
                    _walk(meta_value, ("f:metadata", f"f:{meta_name}"), meta_name, None, lists=lists, out=out)
            continue
        _walk(value, (f"f:{name}",), name, sub, lists=lists, out=out)
    return out


def _walk(value: Any, path: Path, name: str, node: Structural | None, *, lists: ListKinds, out: set[Path]) -> None:
    if isinstance(value, Mapping) and value:  # maps, also those a schema leaves open, are walked
        for key, sub in value.items():
            _walk(sub, (*path, f"f:{key}"), str(key), _child_schema(node, str(key)), lists=lists, out=out)
        return
    if isinstance(value, list) and value:
        items = node.items if node is not None else None
        keys = lists.keys(name, node)
        if keys and all(isinstance(i, Mapping) for i in value):
            for item in value:
                item_path = (*path, _key(item, keys))
                out.add((*item_path, "."))
                for key, sub in item.items():
                    _walk(sub, (*item_path, f"f:{key}"), str(key), _child_schema(items, str(key)), lists=lists, out=out)
            return
        if lists.is_set(name, node):
            out.update((*path, "v:" + json.dumps(v, separators=(",", ":"))) for v in value)
            return
    out.add(path)


def _lookup(value: Any, element: str) -> tuple[bool, Any]:
    kind, _, text = element.partition(":")
    if kind == "f" and isinstance(value, Mapping):
        return (text in value, value.get(text))
    if kind == "k" and isinstance(value, list):
        wanted = json.loads(text)
        for item in value:
            if isinstance(item, Mapping) and all(item.get(k) == v for k, v in wanted.items()):
                return True, item
        return False, None
    if kind == "v" and isinstance(value, list):
        member = json.loads(text)
        return (member in value, member)
    return False, None


def value_at(obj: Any, path: Path) -> tuple[bool, Any]:
    """(present, value) of the field at `path`."""
    value = obj
    for element in path:
        if element == ".":
            return True, value
        present, value = _lookup(value, element)
        if not present:
            return False, None
    return True, value


def encode(paths: set[Path]) -> dict[str, Any]:
    """kube's `fieldsV1`: a trie of path elements, leaves `{}`."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for element in path:
            node = node.setdefault(element, {})
    return root


def decode(trie: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for element, sub in trie.items():
        path = (*prefix, element)
        if isinstance(sub, Mapping) and sub:
            out |= decode(sub, path)
        else:
            out.add(path)
    return out


def iter_prefixes(path: Path) -> Iterator[Path]:
    for i in range(1, len(path)):
        yield path[:i]
