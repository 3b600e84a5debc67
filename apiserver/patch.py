"""The three patch formats of PATCH requests: JSON merge, JSON patch and strategic merge.

- JSON merge patch (RFC 7386, `application/merge-patch+json`): maps merge, `null` deletes,
  everything else (lists too) replaces.
- JSON patch (RFC 6902, `application/json-patch+json`): `add`, `remove`, `replace`, `move`,
  `copy`, `test` on JSON pointers.
- Strategic merge patch (`application/strategic-merge-patch+json`): like a merge patch, except
  that the keyed lists of built-in types merge by their key (containers by `name`, conditions by
  `type`, ...), `finalizers` merge as a set, and the directives kubectl writes (`$patch`,
  `$retainKeys`, `$setElementOrder/…`, `$deleteFromPrimitiveList/…`) are honoured. Kubernetes
  reads the keys from Go struct tags; this module keeps the subset Tessera's types need in
  `MERGE_KEYS`.

The functions take ownership of both arguments (pass private copies: the registry decodes a fresh
copy of the stored object); the result may share structure with them. They raise `PatchError` for
a patch that does not apply, which the handlers turn into a 4xx.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["MERGE_KEYS", "PatchError", "json_patch", "merge_patch", "strategic_merge_patch"]


class PatchError(Exception):
    """The patch is malformed or does not apply (a failed `test`, a missing path)."""


# --- JSON merge patch ------------------------------------------------------------------------------
def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# --- JSON patch ------------------------------------------------------------------------------------
def _pointer(path: object) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise PatchError(f"invalid JSON pointer {path!r}")
    if path == "":
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r}")
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise PatchError(f"array index {i} out of range")
    return i


def _parent(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"path /{'/'.join(tokens)}: {token!r} does not exist")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, allow_end=False)]
        else:
            raise PatchError(f"path /{'/'.join(tokens)}: cannot descend into a {type(node).__name__}")
    return node


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path /{'/'.join(tokens)} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, allow_end=False)]
    raise PatchError(f"path /{'/'.join(tokens)} does not exist")


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path /{'/'.join(tokens)} does not exist")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, allow_end=False))
    raise PatchError(f"path /{'/'.join(tokens)} does not exist")


def _add(doc: Any, tokens: list[str], value: Any, *, replace: bool = False) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"path /{'/'.join(tokens)} does not exist")
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(parent, last, allow_end=False)] = value
        else:
            parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise PatchError(f"path /{'/'.join(tokens)}: cannot add into a {type(parent).__name__}")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = target
    for i, op in enumerate(operations):
        if not isinstance(op, dict) or not isinstance(op.get("op"), str):
            raise PatchError(f"operation {i}: must be an object with an 'op'")
        kind = op["op"]
        tokens = _pointer(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {i} ({kind}): missing 'value'")
        if kind == "add":
            doc = _add(doc, tokens, op["value"])
        elif kind == "remove":
            _remove(doc, tokens)
        elif kind == "replace":
            doc = _add(doc, tokens, op["value"], replace=True)
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from"))
            if kind == "move" and tokens[: len(source)] == source and tokens != source:
                raise PatchError(f"operation {i} (move): cannot move a value into itself")
            value = _remove(doc, source) if kind == "move" else copy.deepcopy(_get(doc, source))
            doc = _add(doc, tokens, value)
        elif kind == "test":
            if _get(doc, tokens) != op["value"]:
                raise PatchError(f"operation {i} (test): value at {op.get('path')} differs")
        else:
            raise PatchError(f"operation {i}: unknown op {kind!r}")
    return doc


# --- strategic merge patch -------------------------------------------------------------------------
#: List field -> the key its items merge by (patchMergeKey in Kubernetes' Go types).
MERGE_KEYS: Final[Mapping[str, str]] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "ports": "containerPort",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "schedulingGates": "name",
}
#: Overrides and additions of MERGE_KEYS for one kind (a Service's ports merge by `port`, a
#: ResourceClaim's consumers in `status.reservedFor` by `uid`).
KIND_MERGE_KEYS: Final[Mapping[str, Mapping[str, str]]] = {
    "Service": {"ports": "port"},
    "ResourceClaim": {"reservedFor": "uid"},
}
#: Lists of scalars that merge as ordered sets.
SET_LISTS: Final = frozenset({"finalizers"})

_PATCH = "$patch"
_RETAIN = "$retainKeys"
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def strategic_merge_patch(target: Any, patch: Any, *, kind: str = "") -> Any:
    keys = {**MERGE_KEYS, **KIND_MERGE_KEYS.get(kind, {})}
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    return _merge_map(target if isinstance(target, dict) else {}, patch, keys)


def _merge_map(target: dict[str, Any], patch: dict[str, Any], keys: Mapping[str, str]) -> Any:
    directive = patch.get(_PATCH)
    if directive == "delete":
        return None
    if directive == "replace":
        return _strip(patch)
    if directive not in (None, "merge"):
        raise PatchError(f"unknown $patch directive {directive!r}")
    out = dict(target)
    retain = patch.get(_RETAIN)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError("$retainKeys must be a list")
        out = {k: v for k, v in out.items() if k in retain}
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in (_PATCH, _RETAIN):
            continue
        if key.startswith(_ORDER):
            if not isinstance(value, list):
                raise PatchError(f"{key} must be a list")
            orders[key.removeprefix(_ORDER)] = value
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key.removeprefix(_DELETE_PRIMITIVE)
            if not isinstance(value, list):
                raise PatchError(f"{key} must be a list")
            if isinstance(out.get(field), list):
                out[field] = [v for v in out[field] if v not in value]
            continue
        if value is None:
            out.pop(key, None)
            continue
        merged = _merge_value(key, out.get(key), value, keys)
        if merged is None:
            out.pop(key, None)
        else:
            out[key] = merged
    for field, order in orders.items():
        if isinstance(out.get(field), list):
            out[field] = _reorder(out[field], order, keys.get(field))
    return out


def _merge_value(key: str, current: Any, value: Any, keys: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        return _merge_map(current if isinstance(current, dict) else {}, value, keys)
    if isinstance(value, list):
        if key in keys:
            return _merge_keyed_list(current if isinstance(current, list) else [], value, keys[key], keys)
        if key in SET_LISTS:
            base = current if isinstance(current, list) else []
            return base + [v for v in value if v not in base]
        if any(isinstance(v, dict) and v.get(_PATCH) == "replace" for v in value):
            return [_strip(v) for v in value if not (isinstance(v, dict) and v.get(_PATCH) == "replace")]
        return value
    return value


def _merge_keyed_list(current: list[Any], patch: list[Any], merge_key: str, keys: Mapping[str, str]) -> list[Any]:
    if any(isinstance(p, dict) and p.get(_PATCH) == "replace" for p in patch):
        return [_strip(p) for p in patch if not (isinstance(p, dict) and p.get(_PATCH) == "replace")]
    out = list(current)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"list items must be objects with the merge key {merge_key!r}")
        position = next(
            (i for i, c in enumerate(out) if isinstance(c, dict) and c.get(merge_key) == item[merge_key]), None
        )
        if item.get(_PATCH) == "delete":
            if position is not None:
                out.pop(position)
            continue
        if position is None:
            out.append(_strip(item))
        else:
            out[position] = _merge_map(out[position], item, keys)
    return out


def _reorder(items: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    """Sort items as `$setElementOrder` lists them; items not listed keep their place at the end."""

    def ident(item: Any) -> Any:
        return item.get(merge_key) if merge_key and isinstance(item, dict) else item

    wanted = [o.get(merge_key) if merge_key and isinstance(o, dict) else o for o in order]
    rank = {repr(w): i for i, w in enumerate(wanted)}
    return sorted(items, key=lambda it: rank.get(repr(ident(it)), len(rank)))


def _strip(value: Any) -> Any:
    """Remove directives from a value that is inserted as-is."""
    if isinstance(value, dict):
        return {
            k: _strip(v)
            for k, v in value.items()
            if k not in (_PATCH, _RETAIN) and not k.startswith((_ORDER, _DELETE_PRIMITIVE))
        }
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
