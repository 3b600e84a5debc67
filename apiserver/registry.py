"""The object store and Kubernetes' write semantics, shared by every resource.

Every current object lives in memory (`Entry`: the dict and its JSON encoding, so lists and
watches send bytes without re-encoding); SQLite (`storage.py`) is the durable copy. A write runs
on the event loop without awaiting until it has checked preconditions, assigned the next
resourceVersion and updated memory; only then does it wait for the commit. So concurrent writers
are serialized without locks, a stale update always sees the newer object (409), and watch events
are published after the commit, in resourceVersion order, so no watcher sees a change a crash
could undo.

What is common to all types is here: metadata (uid, generateName, creationTimestamp, generation,
resourceVersion), optimistic concurrency, status isolation, finalizers and deletionTimestamp,
namespace lifecycle, cascades of CRD and namespace deletion, paging. Per-type rules are
`Strategy` objects.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import collections
import json
import logging
import random
import secrets
import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apis.k8s.meta import now_rfc3339
from apiserver import patch as patches
from apiserver.admission import Admission
from apiserver.apply import tracking
from apiserver.catalog import Catalog, ResourceType
from apiserver.errors import Cause, StatusError
from apiserver.selectors import ObjectFilter
from apiserver.storage import Row, Storage, Write
from apiserver.strategy import Strategy
from apiserver.watch import Event, WatchHub
from kube.logs import V

__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "Entry",
    "ListResult",
    "Registry",
    "apply_patch",
    "encode",
]

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
NAMESPACES = "namespaces"
CRDS = "customresourcedefinitions.apiextensions.k8s.io"
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: Namespaces that cannot be deleted (kube-apiserver's NamespaceLifecycle admission).
IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: What a delete's propagationPolicy leaves on the object for the garbage collector to finish.
PROPAGATION_FINALIZERS = {"Foreground": "foregroundDeletion", "Orphan": "orphan"}
#: Types whose dependents a delete orphans unless asked otherwise (kube-apiserver's
#: DefaultGarbageCollectionPolicy: batch/v1 Jobs keep their pods).
_ORPHAN_BY_DEFAULT = frozenset({"jobs.batch"})
#: Fields of metadata that only the server sets; a client's values are ignored on update.
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")


def encode(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Entry:
    """A stored object. `obj` is never mutated once stored (copy with `fresh()`)."""

    obj: dict[str, Any]
    body: bytes
    rv: int

    def fresh(self) -> dict[str, Any]:
        """A private deep copy of the object, cheaper than copy.deepcopy."""
        result: dict[str, Any] = json.loads(self.body)
        return result


@dataclass(frozen=True, slots=True)
class ListResult:
    entries: list[Entry]
    rv: int
    continue_token: str = ""
    remaining: int | None = None


@dataclass(slots=True)
class _Staged:
    storage_id: str
    key: str
    entry: Entry
    deleted: bool
    event: Event


_Batch = list[tuple[list[_Staged], "asyncio.Future[None] | None"]]


def object_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


class Registry:
    def __init__(
        self,
        catalog: Catalog,
        hub: WatchHub,
        storage: Storage | None,
        strategies: Mapping[str, Strategy],
        *,
        max_object_bytes: int = 1536 * 1024,
        on_fatal: Callable[[BaseException], None] | None = None,
        admission: Admission | None = None,
    ) -> None:
        self.catalog = catalog
        self._admission = admission
        self.hub = hub
        self._storage = storage
        self._strategies = strategies
        self._default_strategy = Strategy()
        self._max_object_bytes = max_object_bytes
        self._on_fatal = on_fatal
        self._objects: dict[str, dict[str, Entry]] = {}
        self._sorted: dict[str, list[str]] = {}  # cached sorted keys per storage id; dropped on insert/remove
        self._population: collections.Counter[str] = collections.Counter()  # objects per namespace
        self._batch: _Batch = []  # staged during this loop iteration, not yet committed
        self._loop: asyncio.AbstractEventLoop | None = None
        # UIDs and generated names need to be unique, not secret: a seeded PRNG spares a
        # getrandom() system call per object (measurable at thousands of creates per second).
        self._random = random.Random(secrets.randbits(64))
        #: The last resourceVersion assigned (including writes not yet committed).
        self.rv = hub.published_rv

    # --- start-up ----------------------------------------------------------------------------------
    def load(self, rows: Iterable[Row]) -> int:
        """Fill memory from storage; replays what strategies derive from stored objects (CRDs'
        types, webhook configurations). Returns the number of objects."""
        count = 0
        restore = []
        for row in rows:
            obj = json.loads(row.body)
            self._insert(row.storage_id, row.key, Entry(obj, row.body, row.rv))
            if self._strategy_for(row.storage_id).restore_on_load:
                restore.append((row.storage_id, obj))
            count += 1
        for storage_id, obj in restore:
            self._strategy_for(storage_id).on_stored(None, obj)
        return count

    async def ensure_namespaces(self, names: Iterable[str] = DEFAULT_NAMESPACES) -> None:
        rt = self._rt(NAMESPACES)
        for name in names:
            if name not in self._objects.get(NAMESPACES, {}):
                await self.create(rt, "", {"metadata": {"name": name}})

    def _rt(self, plural: str) -> ResourceType:
        rt = self.catalog.lookup("", "v1", plural)
        assert rt is not None, plural
        return rt

    # --- reading -----------------------------------------------------------------------------------
    def peek(self, storage_id: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object (not to be mutated), or None: for admission's lookups."""
        entry = self._objects.get(storage_id, {}).get(object_key(namespace, name))
        return None if entry is None else entry.obj

    def get(self, rt: ResourceType, namespace: str, name: str) -> Entry:
        entry = self._objects.get(rt.storage_id, {}).get(object_key(namespace, name))
        if entry is None:
            raise StatusError.not_found(rt.plural, name, group=rt.group)
        return entry

    def _sorted_keys(self, storage_id: str) -> list[str]:
        keys = self._sorted.get(storage_id)
        if keys is None:
            keys = self._sorted[storage_id] = sorted(self._objects.get(storage_id, {}))
        return keys

    def snapshot(self, rt: ResourceType, flt: ObjectFilter) -> list[Entry]:
        return self.list_objects(rt, flt).entries

    def list_objects(
        self, rt: ResourceType, flt: ObjectFilter, *, limit: int = 0, continue_token: str = ""
    ) -> ListResult:
        """Matching objects in key order; with `limit`, a page and a token for the next one."""
        objects = self._objects.get(rt.storage_id, {})
        keys = self._sorted_keys(rt.storage_id)
        list_rv = self.rv  # what memory holds, including writes still being committed
        lo, hi = 0, len(keys)
        if flt.namespace:
            lo = bisect.bisect_left(keys, flt.namespace + "/")
            hi = bisect.bisect_left(keys, flt.namespace + "0", lo)  # "0" sorts right after "/"
        if continue_token:
            list_rv, start_key = _decode_continue(continue_token)
            lo = max(lo, bisect.bisect_right(keys, start_key, lo, hi))
        plain = flt.label.is_empty() and not flt.fields
        entries: list[Entry] = []
        next_token = ""
        remaining: int | None = None
        for i in range(lo, hi):
            entry = objects[keys[i]]
            if not plain and not flt.matches(entry.obj):
                continue
            if limit and len(entries) == limit:
                next_token = _encode_continue(list_rv, _key_of(entries[-1]))
                remaining = hi - i if plain else None
                break
            entries.append(entry)
        return ListResult(entries, list_rv, next_token, remaining)

    # --- writing -----------------------------------------------------------------------------------
    async def create(self, rt: ResourceType, namespace: str, obj: Any, *, dry_run: bool = False) -> Entry:
        meta = self._check_object(rt, obj)
        namespace = self._check_namespace(rt, namespace, meta)
        self._check_namespace_open(rt, namespace)
        strategy = self._strategy_for(rt.storage_id)
        name = meta.get("name") or ""
        if not name:
            prefix = meta.get("generateName")
            if not prefix or not isinstance(prefix, str):
                raise StatusError.invalid(
                    rt.kind, "", [Cause("metadata.name", "Required value: name or generateName is required")]
                )
            name = prefix + "".join(self._random.choice(_GENERATE_ALPHABET) for _ in range(5))
        if not isinstance(name, str):
            raise StatusError.bad_request("metadata.name must be a string")
        meta["name"] = name
        meta["uid"] = str(uuid.UUID(int=self._random.getrandbits(128), version=4))
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        for server_only in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
            meta.pop(server_only, None)
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        strategy.prepare_create(obj)
        self._validate(rt, strategy, obj, None)
        key = object_key(namespace, name)
        if key in self._objects.get(rt.storage_id, {}):
            raise StatusError.already_exists(rt.plural, name, group=rt.group)
        if (admitted := self._admit("CREATE", rt, namespace, name, obj, None, "", dry_run)) is not None:
            await admitted
            self._check_namespace_open(rt, namespace)  # what changed while the webhooks answered
            if key in self._objects.get(rt.storage_id, {}):
                raise StatusError.already_exists(rt.plural, name, group=rt.group)
        if dry_run:
            return self._dry(obj)
        staged = [self._stage(rt.storage_id, key, obj, None)]
        strategy.on_stored(None, obj)
        await self._commit(staged)
        return staged[0].entry

    async def update(
        self, rt: ResourceType, namespace: str, name: str, obj: Any, *, subresource: str = "", dry_run: bool = False
    ) -> Entry:
        meta = self._check_object(rt, obj)
        if meta.get("name", name) != name:
            raise StatusError.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        namespace = self._check_namespace(rt, namespace, meta)
        old = self.get(rt, namespace, name)
        rv = meta.get("resourceVersion")
        if rv and rv != str(old.rv):
            raise StatusError.conflict(
                rt.plural,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
                group=rt.group,
            )
        uid = meta.get("uid")
        if uid and uid != old.obj["metadata"]["uid"]:
            raise StatusError.conflict(
                rt.plural,
                name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old.obj['metadata']['uid']}",
                group=rt.group,
            )
        strategy = self._strategy_for(rt.storage_id)
        new = self._prepare_update(rt, strategy, old, obj, subresource)
        self._validate(rt, strategy, new, old.obj)
        if (admitted := self._admit("UPDATE", rt, namespace, name, new, old.obj, subresource, dry_run)) is not None:
            await admitted
            if self.get(rt, namespace, name).rv != old.rv:  # changed while the webhooks answered
                raise StatusError.conflict(
                    rt.plural,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                    group=rt.group,
                )
        return await self._store(rt, strategy, old, new, dry_run=dry_run)

    async def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        patch_type: str,
        patch: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Entry:
        old = self.get(rt, namespace, name)
        patched = apply_patch(
            old.fresh(), patch_type, patch, kind=rt.kind, strategic=rt.strategic_merge, resource=rt.plural, name=name
        )
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise StatusError(422, "Invalid", "the patched object is not an object with metadata", name=name)
        return await self.update(rt, namespace, name, patched, subresource=subresource, dry_run=dry_run)

    async def mutate(
        self, rt: ResourceType, namespace: str, name: str, change: Callable[[dict[str, Any]], None]
    ) -> Entry:
        """Apply a server-side change (a binding) to a fresh copy, bypassing update rules."""
        old = self.get(rt, namespace, name)
        new = old.fresh()
        change(new)
        return await self._store(rt, self._strategy_for(rt.storage_id), old, new, dry_run=False)

    async def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        propagation: str = "",
    ) -> tuple[Entry, bool]:
        """Delete (or mark for deletion); returns the object's last state and whether it is gone.

        `propagation` (Foreground / Orphan / Background, "" for the type's default) decides what
        the garbage collector does with dependents: Foreground and Orphan leave a finalizer for it
        (`foregroundDeletion`, `orphan`) and the object stays, marked, until it has done so.
        """
        old = self.get(rt, namespace, name)
        self._check_preconditions(rt, old, preconditions or {})
        if (admitted := self._admit("DELETE", rt, namespace, name, None, old.obj, "", dry_run)) is not None:
            await admitted
            old = self.get(rt, namespace, name)  # what changed while the webhooks answered
            self._check_preconditions(rt, old, preconditions or {})
        if dry_run:
            return old, True
        staged = self._stage_delete(rt.storage_id, old, propagation)
        await self._commit(staged)
        if not staged:
            return old, False
        first: _Staged = staged[0]
        return first.entry, first.deleted

    async def delete_collection(
        self, rt: ResourceType, flt: ObjectFilter, *, dry_run: bool = False, propagation: str = ""
    ) -> list[Entry]:
        entries = self.list_objects(rt, flt).entries
        for entry in entries:
            meta = entry.obj["metadata"]
            admitted = self._admit("DELETE", rt, meta.get("namespace", ""), meta["name"], None, entry.obj, "", dry_run)
            if admitted is not None:
                await admitted
        if dry_run:
            return entries
        current = self._objects.get(rt.storage_id, {})
        entries = [c for e in entries if (c := current.get(_key_of(e))) is not None]
        staged = []
        for entry in entries:
            staged += self._stage_delete(rt.storage_id, entry, propagation)
        await self._commit(staged)
        return [s.entry for s in staged if s.storage_id == rt.storage_id]

    # --- helpers of writes -------------------------------------------------------------------------
    def _admit(  # noqa: PLR0917 - the attributes of one write, in the order kube-apiserver lists them
        self,
        operation: str,
        rt: ResourceType,
        namespace: str,
        name: str,
        obj: dict[str, Any] | None,
        old: dict[str, Any] | None,
        subresource: str,
        dry_run: bool,
    ) -> Awaitable[None] | None:
        """Validating admission (the one place writes call webhooks): None when no webhook wants
        this write, else what to await; it raises the StatusError of a refusal."""
        if self._admission is None:
            return None
        return self._admission.review(
            operation=operation,
            rt=rt,
            namespace=namespace,
            name=name,
            obj=obj,
            old=old,
            subresource=subresource,
            dry_run=dry_run,
        )

    def _strategy_for(self, storage_id: str) -> Strategy:
        return self._strategies.get(storage_id, self._default_strategy)

    @staticmethod
    def _check_object(rt: ResourceType, obj: Any) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise StatusError.bad_request(f"the body must be a {rt.kind} object, got {type(obj).__name__}")
        kind = obj.get("kind")
        if kind is not None and kind != rt.kind:
            raise StatusError.bad_request(f"the kind in the body ({kind}) does not match the URL ({rt.kind})")
        version = obj.get("apiVersion")
        if version is not None and version != rt.api_version:
            raise StatusError.bad_request(
                f"the API version in the data ({version}) does not match the expected API version ({rt.api_version})"
            )
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise StatusError.bad_request("metadata must be an object")
        return meta

    @staticmethod
    def _check_namespace(rt: ResourceType, namespace: str, meta: dict[str, Any]) -> str:
        if not rt.namespaced:
            meta.pop("namespace", None)
            return ""
        given = meta.get("namespace")
        if given and given != namespace:
            raise StatusError.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
        return namespace

    def _check_namespace_open(self, rt: ResourceType, namespace: str) -> None:
        if not rt.namespaced:
            return
        ns = self._objects.get(NAMESPACES, {}).get(namespace)
        if ns is None:
            raise StatusError.not_found(NAMESPACES, namespace)
        if ns.obj["metadata"].get("deletionTimestamp"):
            raise StatusError.forbidden(
                f"{rt.plural} is forbidden: unable to create new content in namespace {namespace} "
                "because it is being terminated",
                group=rt.group,
                kind=rt.plural,
            )

    @staticmethod
    def _check_preconditions(rt: ResourceType, old: Entry, pre: Mapping[str, Any]) -> None:
        meta = old.obj["metadata"]
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            raise StatusError.conflict(
                rt.plural,
                meta["name"],
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}",
                group=rt.group,
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != str(old.rv):
            raise StatusError.conflict(
                rt.plural,
                meta["name"],
                f"Precondition failed: ResourceVersion in precondition: "
                f"{pre['resourceVersion']}, ResourceVersion in object meta: {old.rv}",
                group=rt.group,
            )

    def _validate(self, rt: ResourceType, strategy: Strategy, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        causes = strategy.validate(obj, old)
        if causes:
            raise StatusError.invalid(rt.kind, obj["metadata"].get("name", ""), causes, group=rt.group)

    def _prepare_update(
        self, rt: ResourceType, strategy: Strategy, old: Entry, obj: dict[str, Any], subresource: str
    ) -> dict[str, Any]:
        old_meta = old.obj["metadata"]
        if subresource == "status":
            new = old.fresh()
            if obj.get("status") is None:
                new.pop("status", None)
            else:
                new["status"] = obj["status"]
            strategy.prepare_status(new, old.obj)
            return new
        new = obj
        meta = new["metadata"]
        for field in _SERVER_META:
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        if "managedFields" not in meta and "managedFields" in old_meta:
            meta["managedFields"] = old_meta["managedFields"]  # server-side apply's owners stay (apply/)
        meta["resourceVersion"] = str(old.rv)
        new["apiVersion"], new["kind"] = rt.api_version, rt.kind
        if rt.has_status:
            status = old.fresh().get("status")
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        strategy.prepare_update(new, old.obj)
        tracking.record_update(rt, new, old.obj)
        if old_meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or ()) - set(old_meta.get("finalizers") or ())
            if added:
                raise StatusError.invalid(
                    rt.kind,
                    meta["name"],
                    [
                        Cause(
                            "metadata.finalizers",
                            "Forbidden: no new finalizers can be added if the object is being deleted",
                            "FieldValueForbidden",
                        )
                    ],
                    group=rt.group,
                )
        if _spec_of(new, rt.has_status) != _spec_of(old.obj, rt.has_status):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        return new

    async def _store(
        self, rt: ResourceType, strategy: Strategy, old: Entry, new: dict[str, Any], *, dry_run: bool
    ) -> Entry:
        new["metadata"]["resourceVersion"] = str(old.rv)
        if new == old.obj:
            return old  # a no-op write changes nothing, not even the resourceVersion
        if dry_run:
            return self._dry(new)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            staged = self._stage_removal(rt.storage_id, old, new)
        else:
            staged = [self._stage(rt.storage_id, _key_of(old), new, old)]
            strategy.on_stored(old.obj, new)
        await self._commit(staged)
        return staged[0].entry

    def _dry(self, obj: dict[str, Any]) -> Entry:
        body = encode(obj)
        self._check_size(obj, body)
        return Entry(obj, body, int(obj["metadata"].get("resourceVersion") or 0))

    def _check_size(self, obj: dict[str, Any], body: bytes) -> None:
        if len(body) > self._max_object_bytes:
            raise StatusError.too_large(
                f"{obj.get('kind', 'object')} {obj['metadata'].get('name', '')!r} is {len(body)} bytes, "
                f"limit is {self._max_object_bytes}"
            )

    def _stage(self, storage_id: str, key: str, obj: dict[str, Any], old: Entry | None) -> _Staged:
        """Assign the next resourceVersion and put `obj` in memory (not yet committed)."""
        rv = self.rv + 1
        obj["metadata"]["resourceVersion"] = str(rv)
        body = encode(obj)
        self._check_size(obj, body)
        self.rv = rv
        entry = Entry(obj, body, rv)
        self._insert(storage_id, key, entry)
        event = Event(rv, "ADDED" if old is None else "MODIFIED", obj, body, None if old is None else old.obj)
        return _Staged(storage_id, key, entry, False, event)

    def _stage_removal(self, storage_id: str, old: Entry, final: dict[str, Any] | None = None) -> list[_Staged]:
        """Remove an object for good; cascades to a CRD's objects and an emptied terminating namespace."""
        obj = final if final is not None else old.fresh()
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        body = encode(obj)
        key = _key_of(old)
        self._remove(storage_id, key)
        entry = Entry(obj, body, self.rv)
        staged = [_Staged(storage_id, key, entry, True, Event(self.rv, "DELETED", obj, body))]
        self._strategy_for(storage_id).on_stored(old.obj, None)
        if storage_id == CRDS:
            spec = old.obj.get("spec", {})
            owned = f"{spec.get('names', {}).get('plural')}.{spec.get('group')}"
            for dependent in list(self._objects.get(owned, {}).values()):
                staged += self._stage_removal(owned, dependent)
        namespace = obj["metadata"].get("namespace", "")
        if namespace and self._population[namespace] == 0:
            ns = self._objects.get(NAMESPACES, {}).get(namespace)
            if ns is not None and ns.obj["metadata"].get("deletionTimestamp"):
                staged += self._stage_removal(NAMESPACES, ns)
        return staged

    def _stage_delete(self, storage_id: str, old: Entry, propagation: str = "") -> list[_Staged]:
        """Delete: mark when finalizers remain, else remove; a namespace takes its contents along."""
        meta = old.obj["metadata"]
        if meta.get("deletionTimestamp"):
            return []  # already being deleted
        if storage_id == NAMESPACES:
            return self._stage_namespace_delete(old)
        if not propagation and storage_id in _ORPHAN_BY_DEFAULT:
            propagation = "Orphan"
        extra = PROPAGATION_FINALIZERS.get(propagation)
        if meta.get("finalizers") or extra:
            marked = _marked_deleted(old)
            if extra and extra not in (marked["metadata"].get("finalizers") or ()):
                marked["metadata"]["finalizers"] = [*(marked["metadata"].get("finalizers") or ()), extra]
            return [self._stage(storage_id, _key_of(old), marked, old)]
        return self._stage_removal(storage_id, old)

    def _stage_namespace_delete(self, ns: Entry) -> list[_Staged]:
        name = ns.obj["metadata"]["name"]
        if name in IMMORTAL_NAMESPACES:
            raise StatusError.forbidden(
                f'namespaces "{name}" is forbidden: this namespace may not be deleted', kind=NAMESPACES, name=name
            )
        marked = _marked_deleted(ns)
        marked.setdefault("status", {})["phase"] = "Terminating"
        staged = [self._stage(NAMESPACES, name, marked, ns)]
        for storage_id, objects in list(self._objects.items()):
            keys = self._sorted_keys(storage_id)
            lo = bisect.bisect_left(keys, name + "/")
            hi = bisect.bisect_left(keys, name + "0", lo)
            for key in keys[lo:hi]:  # as the namespace controller deletes: in the background
                staged += self._stage_delete(storage_id, objects[key], "Background")
        if self._population[name] == 0 and name in self._objects.get(NAMESPACES, {}):
            staged += self._stage_removal(NAMESPACES, self._objects[NAMESPACES][name])
        return staged

    def _insert(self, storage_id: str, key: str, entry: Entry) -> None:
        objects = self._objects.setdefault(storage_id, {})
        if key not in objects:
            self._sorted.pop(storage_id, None)
            namespace, sep, _ = key.partition("/")
            if sep:
                self._population[namespace] += 1
        objects[key] = entry

    def _remove(self, storage_id: str, key: str) -> None:
        if self._objects.get(storage_id, {}).pop(key, None) is not None:
            self._sorted.pop(storage_id, None)
            namespace, sep, _ = key.partition("/")
            if sep:
                self._population[namespace] -= 1

    async def _commit(self, staged: list[_Staged]) -> None:
        """Wait until `staged` is durable; then its events are published (in resourceVersion order).

        Writes staged during one event-loop iteration are committed together, at the end of the
        iteration (`_flush`), so a burst of concurrent requests costs one transaction.
        """
        if not staged:
            return
        if self._storage is None:
            self._publish([(staged, None)])
            return
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = self._loop.create_future()
        self._batch.append((staged, done))
        if len(self._batch) == 1:
            self._loop.call_soon(self._flush)
        await done

    def _flush(self) -> None:
        batch, self._batch = self._batch, []
        assert self._storage is not None
        writes = [
            Write(s.storage_id, s.key, s.entry.rv, None if s.deleted else s.entry.body)
            for staged, _ in batch
            for s in staged
        ]
        try:
            self._storage.commit(writes)
        except sqlite3.Error as error:
            for _, done in batch:
                if done is not None and not done.done():
                    done.set_exception(StatusError.internal("storage failure"))
            if self._on_fatal is not None:
                self._on_fatal(error)
            return
        self._publish(batch)

    def _publish(self, batch: list[tuple[list[_Staged], asyncio.Future[None] | None]]) -> None:
        events: dict[str, list[Event]] = {}
        top = 0
        for staged, _ in batch:
            for s in staged:
                events.setdefault(s.storage_id, []).append(s.event)
                top = max(top, s.entry.rv)
        self.hub.publish(events, top)
        log.log(V(6), "Published", extra={"rv": top, "writes": sum(len(staged) for staged, _ in batch)})
        for _, done in batch:
            if done is not None and not done.done():
                done.set_result(None)


def apply_patch(doc: Any, patch_type: str, patch: Any, *, kind: str, strategic: bool, resource: str, name: str) -> Any:
    """`doc` (a private copy) with `patch` applied. Raises StatusError: 415 for a patch type the
    kind does not take, 422 for a patch that does not apply."""
    try:
        if patch_type == MERGE_PATCH:
            if not isinstance(patch, dict):
                raise patches.PatchError("a merge patch must be a JSON object")
            return patches.merge_patch(doc, patch)
        if patch_type == JSON_PATCH:
            return patches.json_patch(doc, patch)
        if patch_type == STRATEGIC_MERGE_PATCH and strategic:
            return patches.strategic_merge_patch(doc, patch, kind=kind)
    except patches.PatchError as e:
        raise StatusError(422, "Invalid", f"the patch does not apply: {e}", kind=resource, name=name) from None
    raise StatusError.unsupported_media_type(patch_type)


def _key_of(entry: Entry) -> str:
    meta = entry.obj["metadata"]
    return object_key(meta.get("namespace", ""), meta["name"])


def _marked_deleted(entry: Entry) -> dict[str, Any]:
    obj = entry.fresh()
    obj["metadata"]["deletionTimestamp"] = now_rfc3339()
    obj["metadata"]["deletionGracePeriodSeconds"] = 0
    return obj


def _spec_of(obj: Mapping[str, Any], has_status: bool) -> dict[str, Any]:
    """Everything a generation counts: all but metadata (and status, when it is a subresource)."""
    skip = ("metadata", "status") if has_status else ("metadata",)
    return {k: v for k, v in obj.items() if k not in skip}


def _encode_continue(rv: int, key: str) -> str:
    raw = json.dumps({"rv": rv, "start": key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        doc = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        rv, key = doc["rv"], doc["start"]
        if not isinstance(rv, int) or not isinstance(key, str):
            raise ValueError("bad token fields")
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise StatusError.bad_request("invalid continue token") from None
    return rv, key
