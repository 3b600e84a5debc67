"""One server-side apply request: create or merge, track managers, refuse or force conflicts.

Managed fields are kept in `metadata.managedFields` as kube keeps them (`manager`, `operation:
Apply`, `apiVersion`, `time`, `fieldsType: FieldsV1`, `fieldsV1`). A conflict is kube's 409:
`Apply failed with 1 conflict: conflict with "team-a" using v1: .spec.replicas`, with one
`FieldManagerConflict` cause per field; `?force=true` takes the fields over instead.
Writes other than apply are recorded by `tracking.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.k8s.meta import now_rfc3339
from apiserver.apply import tracking
from apiserver.apply.fields import ListKinds, Path, decode, encode, leaves
from apiserver.apply.merge import conflicting, merge, path_string, remove
from apiserver.catalog import ResourceType
from apiserver.errors import Cause, StatusError
from apiserver.registry import Entry, Registry
from apiserver.schema import strategy

__all__ = ["APPLY_PATCH", "server_side_apply"]

APPLY_PATCH = "application/apply-patch+yaml"


def _entries(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = (obj.get("metadata") or {}).get("managedFields") or []
    return [dict(e) for e in found if isinstance(e, Mapping) and isinstance(e.get("fieldsV1"), Mapping)]


def _entry(manager: str, api_version: str, paths: set[Path], subresource: str) -> dict[str, Any]:
    entry = {
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": now_rfc3339(),
        "fieldsType": "FieldsV1",
        "fieldsV1": encode(paths),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _conflict_error(rt: ResourceType, name: str, conflicts: list[tuple[str, str, Path]]) -> StatusError:
    causes = [Cause(path_string(p), f'conflict with "{m}" using {v}', "FieldManagerConflict") for m, v, p in conflicts]
    if len(conflicts) == 1:
        manager, version, path = conflicts[0]
        message = f'Apply failed with 1 conflict: conflict with "{manager}" using {version}: {path_string(path)}'
    else:
        lines = "\n".join(f'conflict with "{m}" using {v}: {path_string(p)}' for m, v, p in conflicts)
        message = f"Apply failed with {len(conflicts)} conflicts: {lines}"
    error = StatusError(409, "Conflict", message, group=rt.group, kind=rt.plural, name=name, causes=causes)
    return error


def _check(applied: Any, rt: ResourceType, name: str) -> dict[str, Any]:
    if not isinstance(applied, dict):
        raise StatusError.bad_request("the applied configuration must be an object")
    for field in ("apiVersion", "kind"):
        if not applied.get(field):
            raise StatusError.bad_request(f"{field} must be set in an applied configuration")
    meta = applied.setdefault("metadata", {})
    if not isinstance(meta, dict) or meta.get("name", name) != name:
        raise StatusError.bad_request("the name in the applied configuration does not match the URL")
    meta["name"] = name
    return applied


async def server_side_apply(
    registry: Registry,
    rt: ResourceType,
    namespace: str,
    name: str,
    applied: Any,
    *,
    manager: str,
    force: bool,
    subresource: str = "",
    dry_run: bool = False,
) -> tuple[Entry, bool]:
    """Apply; returns the stored object and whether it was created."""
    if not manager:
        raise StatusError.bad_request("fieldManager is required for apply requests")
    applied = _check(applied, rt, name)
    strategy.drop_unknown_applied(rt, applied)
    lists = ListKinds.for_type(rt.kind, rt.schema)
    mine = leaves(applied, lists, status=subresource == "status")
    try:
        live = registry.get(rt, namespace, name)
    except StatusError as e:
        if e.code != 404 or subresource:
            raise
        applied["metadata"]["managedFields"] = [_entry(manager, rt.api_version, mine, "")]
        return await registry.create(rt, namespace, applied, dry_run=dry_run), True
    current = live.fresh()
    entries = _entries(current)
    conflicts = []
    for entry in entries:
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            continue
        owned = decode(entry["fieldsV1"])
        clashing = sorted(p for p in mine & owned if conflicting(p, current, applied))
        if clashing and force:
            entry["fieldsV1"] = encode(owned - set(clashing))
        conflicts += [(str(entry.get("manager")), str(entry.get("apiVersion")), p) for p in clashing]
    if conflicts and not force:
        raise _conflict_error(rt, name, conflicts)
    previous: set[Path] = set()
    others: set[Path] = set()
    kept = []
    for entry in entries:
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            previous = decode(entry["fieldsV1"])
            continue
        owned = decode(entry["fieldsV1"])
        if owned:
            others |= owned
            kept.append(entry)
    merged = merge(current, applied, lists)
    for path in sorted(previous - mine - others, key=len, reverse=True):
        remove(merged, path)
    merged["metadata"]["managedFields"] = [*kept, _entry(manager, rt.api_version, mine, subresource)]
    with tracking.suspended():
        stored = await registry.update(rt, namespace, name, merged, subresource=subresource, dry_run=dry_run)
    return stored, False
