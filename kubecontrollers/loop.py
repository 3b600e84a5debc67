"""The engine under the workload controllers: informers in, one sync at a time, plans out.

Informers (one per kind, shared) name keys — `("replicaset", "ns/name")`, `("gc", "")` — for
the controllers an event concerns (a pod names its controller and its namespace's budgets). One
worker takes keys off a deduplicating queue, hands the cached objects to the controller's pure
sync function and performs the `Plan` it returns. One worker on purpose: the controllers of one
object never race each other, and this is an embedded cluster's load.

**Expectations** (kube's ControllerExpectations): after a write, the key is not synced again until
the informer shows what was written — every pod created is in the cache, every pod deleted gone,
every status write seen — or 30 s have passed. Without them a sync right after creating pods
would, from a cache not yet updated, create them again. They live in memory only: a
controller killed mid-rollout starts from a fresh list of the API server, which has every write
that succeeded, so it creates nothing twice. A write that fails (409 from a stale view, the API
server away) puts the key back with a delay; the next sync recomputes from the newer state.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram

from apis.extension.names import GroupVersionResource
from kube import errors
from kube.client import Client
from kube.events import EventRecorder
from kube.informer import Informer
from kube.logs import V
from kubecontrollers.plan import Action, Create, Delete, Note, Obj, Patch, Plan

__all__ = ["EXPECTATION_TIMEOUT_S", "Engine", "Key", "Metrics", "SyncFunction"]

log = logging.getLogger(__name__)

EXPECTATION_TIMEOUT_S: Final = 30.0
_RETRY_S: Final = 1.0
#: (controller, "namespace/name"); the garbage collector's key is ("gc", "").
Key = tuple[str, str]
SyncFunction = Callable[[str], Plan | None]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.syncs = Counter(
            "tessera_kube_controllers_syncs_total", "Syncs run, by controller", ["controller"], registry=self.registry
        )
        self.errors = Counter(
            "tessera_kube_controllers_write_errors_total",
            "Writes the API server refused or did not answer, by controller",
            ["controller"],
            registry=self.registry,
        )
        self.writes = Counter(
            "tessera_kube_controllers_writes_total",
            "Writes made, by controller and verb",
            ["controller", "verb"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "tessera_kube_controllers_sync_duration_seconds",
            "Time to decide one sync (without the writes)",
            ["controller"],
            registry=self.registry,
        )


@dataclass(slots=True)
class _Expectation:
    deadline: float
    present: set[tuple[str, str]] = field(default_factory=set)  # (resource, key) that must be cached
    absent: set[tuple[str, str, str]] = field(default_factory=set)  # (resource, key, uid) that must go
    newer: dict[tuple[str, str], int] = field(default_factory=dict)  # (resource, key) -> rv at least


def _rv(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0


class Engine:
    """Keys in, syncs run, plans performed; see the module docstring. Thread-safe `add`."""

    def __init__(
        self,
        client: Client,
        informers: Mapping[str, Informer[Any]],
        syncs: Mapping[str, SyncFunction],
        *,
        metrics: Metrics,
        events: EventRecorder | None = None,
        resync_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`informers`: resource plural -> its informer (for expectations); `syncs`: controller -> sync(key)."""
        self._client = client
        self._events = events
        self._informers = informers
        self._syncs = syncs
        self.metrics = metrics
        self._resync_s = resync_s
        self._clock = clock
        self._cond = threading.Condition()
        self._ready: list[Key] = []
        self._queued: set[Key] = set()
        self._delayed: list[tuple[float, int, Key]] = []
        self._tiebreak = itertools.count()
        self._expect: dict[Key, _Expectation] = {}
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._all_keys: Callable[[], Iterable[Key]] = list

    @property
    def controllers(self) -> list[str]:
        """The controllers the engine syncs, by name."""
        return list(self._syncs)

    # --- the queue ---------------------------------------------------------------------------------
    def add(self, key: Key, after: float = 0.0) -> None:
        with self._cond:
            if after > 0:
                heapq.heappush(self._delayed, (self._clock() + after, next(self._tiebreak), key))
            elif key not in self._queued:
                self._queued.add(key)
                self._ready.append(key)
            self._cond.notify()

    def _next(self) -> Key | None:
        with self._cond:
            while not self._stopping:
                now = self._clock()
                while self._delayed and self._delayed[0][0] <= now:
                    _, _, key = heapq.heappop(self._delayed)
                    if key not in self._queued:
                        self._queued.add(key)
                        self._ready.append(key)
                if self._ready:
                    key = self._ready.pop(0)
                    self._queued.discard(key)
                    return key
                wait = self._delayed[0][0] - now if self._delayed else None
                self._cond.wait(timeout=wait)
            return None

    # --- running -----------------------------------------------------------------------------------
    def start(self, all_keys: Callable[[], Iterable[Key]]) -> None:
        """Start the worker; every `resync_s` it syncs `all_keys()` (time-based rules need no event)."""
        self._all_keys = all_keys
        for key in all_keys():
            self.add(key)
        self._thread = threading.Thread(target=self._run, name="kube-controllers", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        next_resync = self._clock() + self._resync_s
        while (key := self._next()) is not None:
            if self._clock() >= next_resync:
                next_resync = self._clock() + self._resync_s
                for other in self._all_keys():
                    self.add(other)
            try:
                self.sync(key)
            except Exception:  # the loop's boundary: one object's bug must not stop the others
                log.exception("Sync failed", extra={"controller": key[0], "key": key[1]})
                self.add(key, after=_RETRY_S * 5)

    def sync(self, key: Key) -> None:
        """Sync one key now (unless it still waits for its writes to show)."""
        controller, name = key
        if not self._satisfied(key):
            return
        started = time.monotonic()
        plan = self._syncs[controller](name)
        self.metrics.duration.labels(controller).observe(time.monotonic() - started)
        self.metrics.syncs.labels(controller).inc()
        if plan is None:
            return
        expectation = _Expectation(self._clock() + EXPECTATION_TIMEOUT_S)
        failed = False
        for action in plan.actions:
            try:
                done = self._perform(controller, action, expectation)
            except errors.APIError as e:
                failed = True
                self.metrics.errors.labels(controller).inc()
                log.log(
                    V(2) if isinstance(e, errors.Conflict) else V(0),
                    "Write failed; will sync again",
                    extra={"controller": controller, "key": name, "action": type(action).__name__, "error": str(e)},
                )
                break  # the rest was decided from the same view: decide again
            if done and action.note is not None:
                self._record(action.note)
        for told in plan.notes:
            self._record(told)
        if plan.track and (expectation.present or expectation.absent or expectation.newer):
            self._expect[key] = expectation
            self.add(key, after=EXPECTATION_TIMEOUT_S)
        if failed:
            self.add(key, after=_RETRY_S)
        elif plan.requeue_after is not None:
            self.add(key, after=max(plan.requeue_after, 0.05))

    def _record(self, told: Note) -> None:
        if self._events is not None:
            self._events.event(told.about, told.type, told.reason, told.message)

    # --- writes ------------------------------------------------------------------------------------
    def _perform(self, controller: str, action: Action, expect: _Expectation) -> bool:
        """Make the write; whether it changed anything (False: it had been done, or was not needed)."""
        api = self._client.resource(action.resource)
        plural = action.resource.plural
        if isinstance(action, Create):
            try:
                api.create(action.body, namespace=action.namespace)
            except errors.AlreadyExists:
                return False
            expect.present.add((plural, f"{action.namespace}/{action.name}"))
            self.metrics.writes.labels(controller, "create").inc()
            log.log(V(2), "Created", extra={"controller": controller, "resource": plural, "object": action.name})
            return True
        elif isinstance(action, Patch):
            result = api.patch(
                action.name,
                action.patch,
                namespace=action.namespace,
                patch_type=action.patch_type,
                subresource=action.subresource,
            )
            rv = _rv(((result or {}).get("metadata") or {}).get("resourceVersion"))
            expect.newer[(plural, f"{action.namespace}/{action.name}")] = rv
            self.metrics.writes.labels(controller, "patch").inc()
            log.log(V(4), "Patched", extra={"controller": controller, "resource": plural, "object": action.name})
            return True
        elif isinstance(action, Delete):
            if action.unless_owners and self._any_owner_exists(action.namespace, action.unless_owners):
                return False
            try:
                api.delete(
                    action.name, namespace=action.namespace, uid=action.uid, propagation_policy=action.propagation
                )
            except errors.NotFound:
                return False
            expect.absent.add((plural, f"{action.namespace}/{action.name}", action.uid))
            self.metrics.writes.labels(controller, "delete").inc()
            log.log(V(2), "Deleted", extra={"controller": controller, "resource": plural, "object": action.name})
            return True

    def _any_owner_exists(self, namespace: str, owners: Iterable[tuple[GroupVersionResource, str, str]]) -> bool:
        for resource, name, uid in owners:
            try:
                owner = self._client.resource(resource).get(name, namespace=namespace)
            except errors.NotFound:
                continue
            if (owner.get("metadata") or {}).get("uid") == uid:
                return True
        return False

    # --- expectations ------------------------------------------------------------------------------
    def _satisfied(self, key: Key) -> bool:
        expectation = self._expect.get(key)
        if expectation is None:
            return True
        if self._clock() >= expectation.deadline or self._seen(expectation):
            del self._expect[key]
            return True
        return False

    def _seen(self, e: _Expectation) -> bool:
        for plural, key in e.present:
            if self._informers[plural].store.get(key) is None:
                return False
        for plural, key, uid in e.absent:
            obj: Obj | None = self._informers[plural].store.get(key)
            meta = (obj or {}).get("metadata") or {}
            if obj is not None and meta.get("uid") == uid and not meta.get("deletionTimestamp"):
                return False
        for (plural, key), rv in e.newer.items():
            store = self._informers[plural].store
            if store.get(key) is not None and _rv(store.resource_version(key)) < rv:
                return False
        return True
