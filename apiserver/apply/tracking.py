"""Writes other than apply, recorded as `operation: Update` managers of the fields they change.

kube-apiserver records every write: a PUT or patch takes over the fields it changes from their
previous managers (no conflict: only apply conflicts), so that a later apply of another value to
such a field conflicts with whoever wrote it (`conflict with "kubectl-edit"`). The manager is
the request's `?fieldManager=`, or the User-Agent's product name (`kubectl`, `tessera`), as kube
derives it. Here that is done for objects someone has applied (those with managedFields);
objects only ever written by update carry none, which spares every pod write the bookkeeping.

The manager is request-scoped: the HTTP layer opens `updates_by(...)` per request and the
registry's update path calls `record_update`, without the layers between passing it along.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import Any

from apis.k8s.meta import now_rfc3339
from apiserver.apply.fields import ListKinds, Path, decode, encode, leaves, value_at
from apiserver.catalog import ResourceType

__all__ = ["manager_for", "record_update", "suspended", "updates_by"]

_manager: contextvars.ContextVar[str | None] = contextvars.ContextVar("field_manager", default=None)


def manager_for(field_manager: str, user_agent: str) -> str:
    """`?fieldManager=`, else the User-Agent up to its first `/` (kube's default)."""
    return field_manager or user_agent.split("/", 1)[0].strip() or "unknown"


@contextlib.contextmanager
def updates_by(manager: str) -> Iterator[None]:
    token = _manager.set(manager)
    try:
        yield
    finally:
        _manager.reset(token)


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Inside an apply: the applier's own write is recorded as Apply, not as an update."""
    token = _manager.set(None)
    try:
        yield
    finally:
        _manager.reset(token)


def _changed(new: Mapping[str, Any], old: Mapping[str, Any], lists: ListKinds) -> tuple[set[Path], set[Path]]:
    after, before = leaves(new, lists), leaves(old, lists)
    return {p for p in after if value_at(new, p) != value_at(old, p)}, before - after


def record_update(rt: ResourceType, new: dict[str, Any], old: Mapping[str, Any]) -> None:
    """Give the request's manager the fields `new` changes (objects with managedFields only)."""
    manager = _manager.get()
    entries = new.get("metadata", {}).get("managedFields")
    if manager is None or not entries or not isinstance(entries, list):
        return
    changed, removed = _changed(new, old, ListKinds.for_type(rt.kind, rt.schema))
    if not changed and not removed:
        return
    kept, mine = [], None
    for entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("fieldsV1"), Mapping):
            continue
        if entry.get("manager") == manager and entry.get("operation") == "Update" and not entry.get("subresource"):
            mine = decode(entry["fieldsV1"])
            continue
        owned = decode(entry["fieldsV1"]) - changed - removed
        if owned:
            kept.append({**entry, "fieldsV1": encode(owned)})
    owned_now = ((mine or set()) | changed) - removed
    if owned_now:
        kept.append(
            {
                "manager": manager,
                "operation": "Update",
                "apiVersion": rt.api_version,
                "time": now_rfc3339(),
                "fieldsType": "FieldsV1",
                "fieldsV1": encode(owned_now),
            }
        )
    new["metadata"]["managedFields"] = kept
