"""Informers: a local, always-current copy of a resource, and callbacks when it changes.

An `Informer` lists a resource, then watches it from the list's resourceVersion, keeping a
`Store` up to date and calling handlers with the changes. It survives the API server going away:
on a broken watch it re-watches from the last resourceVersion it saw (with backoff), and when
that is too old (410 Gone) it relists and hands the handlers only the difference between what
they had and what is there now. So handlers see each change at most once, in order, except what
Kubernetes itself allows: after a relist, changes in between are collapsed into one update, and
a deletion the informer missed is reported with the last state it knew.

Threads: one reads from the API server (list/watch, updating the store), one calls the handlers
in order; a slow handler delays later handler calls, never the watch. Handlers must not block for
long (queue work elsewhere). They receive what `parse` returns — an `apis` dataclass
(`Pod.from_dict`, `Device.from_dict`) or, by default, the raw dict. An object that fails to parse
is logged and skipped (the store keeps the last version that parsed); it never stops the informer.

Periodic resync (`resync_period`) calls `on_update(obj, obj)` for every object, so level-driven
controllers can re-check everything now and then without another list.

A resource the server does not serve (404 on the list: an optional CRD not installed, say
scheduler-plugins' PodGroup) is said once as a warning and then retried quietly with the usual
backoff, so that it syncs as soon as the CRD is installed without a warning every few seconds.
Until then `wait_until_answered` returns and `not_served` is true: a component that must see a
resource's objects before it acts (the scheduler, a claim's devices) may go on when the server
serves no such objects at all — there are none to see.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from apis.errors import TesseraError
from apis.extension.names import GroupVersionResource
from kube import errors
from kube.backoff import Backoff
from kube.cache import Indexer, Store
from kube.client import Client
from kube.logs import V
from kube.resources import ResourceAPI, WatchStream, object_key

__all__ = ["Handlers", "Informer", "InformerFactory", "raw"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Obj = dict[str, Any]


def raw(obj: Obj) -> Obj:
    """The identity parser: handlers and the store get the JSON dicts themselves."""
    return obj


@dataclass(frozen=True, slots=True)
class Handlers(Generic[T]):
    on_add: Callable[[T], None] | None = None
    on_update: Callable[[T, T], None] | None = None
    on_delete: Callable[[T], None] | None = None


_STOP = object()
_BACKOFF = Backoff()


class Informer(Generic[T]):
    def __init__(
        self,
        client: Client,
        gvr: GroupVersionResource,
        *,
        parse: Callable[[Obj], T],
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        indexers: Mapping[str, Indexer[T]] | None = None,
        resync_period: float = 0.0,
        backoff: Backoff = _BACKOFF,
        page_size: int = 500,
        watch_timeout: tuple[int, int] = (300, 600),
    ) -> None:
        """Watch `gvr` (in `namespace`, or all; filtered by the selectors). Call `start()` to begin.

        `parse` turns each object into what the cache holds and handlers get (`Pod.from_dict`, or
        `raw` for the JSON dicts themselves).

        `watch_timeout` is the range (seconds) each watch request asks the server to keep it
        open, randomized so many informers do not reconnect at once.
        """
        self.gvr = gvr
        self.store: Store[T] = Store(indexers)
        self._api = ResourceAPI(client, gvr)
        self._parse = parse
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._resync_period = resync_period
        self._backoff = backoff
        #: A 404 on the list was said (once, until the resource is served).
        self._said_not_served = False
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self._name = f"{gvr.plural}.{gvr.group}" if gvr.group else gvr.plural
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._handlers: list[Handlers[T]] = []  # owned by the dispatcher thread
        self._delivered: dict[str, T] = {}  # what the handlers have seen; owned by the dispatcher
        self._stop = threading.Event()
        self._synced = threading.Event()
        #: Set once the first list is delivered or the server said it does not serve the resource.
        self._answered = threading.Event()
        self._not_served = False
        self._lock = threading.Lock()
        self._stream: WatchStream | None = None
        self._threads: list[threading.Thread] = []
        #: The newest resourceVersion seen (list, event or bookmark).
        self.resource_version = ""
        #: Objects skipped because they did not parse (a count; the log says which and why).
        self.malformed = 0
        #: Full lists done: 1 after the first sync, one more for each relist (410 Gone).
        self.lists = 0
        #: Lists whose changes are queued but not yet all handed to the handlers.
        self._lists_in_flight = 0

    # --- public ------------------------------------------------------------------------------------
    def add_handlers(
        self,
        on_add: Callable[[T], None] | None = None,
        on_update: Callable[[T, T], None] | None = None,
        on_delete: Callable[[T], None] | None = None,
    ) -> None:
        """Register callbacks. Added after start, they first get `on_add` for every known object."""
        self._queue.put(("register", "", Handlers(on_add, on_update, on_delete), None))

    def start(self) -> None:
        if self._threads:
            raise RuntimeError(f"informer {self._name} already started")
        for target, role in ((self._reflect, "reflector"), (self._dispatch, "dispatcher")):
            thread = threading.Thread(target=target, name=f"informer-{self._name}-{role}", daemon=True)
            thread.start()
            self._threads.append(thread)
        log.log(V(2), "Informer started", extra={"resource": self._name, "namespace": self._namespace or "*"})

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """True once the first list has been delivered to the handlers."""
        return self._synced.wait(timeout)

    def wait_until_answered(self, timeout: float | None = None) -> bool:
        """True once the first list has been delivered, or the server has said (404) that it does
        not serve the resource (`not_served`)."""
        return self._answered.wait(timeout)

    @property
    def not_served(self) -> bool:
        """The last list was answered 404: the server does not serve the resource (yet)."""
        return self._not_served and not self._synced.is_set()

    @property
    def started(self) -> bool:
        return bool(self._threads)

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    @property
    def settled(self) -> bool:
        """Synced, and no list (a relist after 410 Gone) half handed to the handlers: what they
        have seen is one state of the resource, not a mix of two. A controller about to act on
        the whole picture (quota reclaim) waits for this."""
        with self._lock:
            return self._synced.is_set() and self._lists_in_flight == 0

    def stop(self, timeout: float = 10.0) -> None:
        """Stop both threads (pending handler calls are still made). Idempotent."""
        self._stop.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()
        self._queue.put(_STOP)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    def __enter__(self) -> Informer[T]:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the reflector thread ----------------------------------------------------------------------
    def _reflect(self) -> None:
        delays: Iterator[float] | None = None
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                    delays = None
                    self._said_not_served = False
                    self._not_served = False
                if self._watch():
                    delays = None
            except errors.Gone:
                log.log(V(2), "Watch expired; relisting", extra={"resource": self._name, "rv": self.resource_version})
                need_list = True
            except errors.NotFound as e:
                if self._stop.is_set():
                    break
                delays = delays or self._backoff.delays()
                delay = next(delays)
                level = V(4) if self._said_not_served else logging.WARNING
                self._said_not_served = True
                self._not_served = True
                self._answered.set()
                log.log(
                    level,
                    "Resource not served by the API server; waiting for it",
                    extra={"resource": self._name, "error": str(e), "retryIn": f"{delay:.2f}s"},
                )
                self._stop.wait(delay)
            except errors.APIError as e:
                if self._stop.is_set():
                    break
                if e.status == 504 and "resource version" in e.message:
                    need_list = True  # the server is behind what we saw (its data was reset)
                delays = delays or self._backoff.delays()
                delay = next(delays)
                log.warning(
                    "List/watch failed; retrying",
                    extra={"resource": self._name, "error": str(e), "retryIn": f"{delay:.2f}s"},
                )
                self._stop.wait(delay)
            except Exception:
                log.exception("Informer failed; relisting", extra={"resource": self._name})
                need_list = True
                delays = delays or self._backoff.delays()
                self._stop.wait(next(delays))

    def _decode(self, obj: Obj, key: str) -> T | None:
        obj.setdefault("apiVersion", self.gvr.api_version)
        obj.setdefault("kind", self.gvr.kind)
        try:
            parsed: T = self._parse(obj)
        except TesseraError as e:
            self.malformed += 1
            log.warning("Skipping malformed object", extra={"resource": self._name, "object": key, "error": str(e)})
            return None
        except Exception:  # a bug in the parser must not stop the informer either
            self.malformed += 1
            log.exception("Parser failed; skipping object", extra={"resource": self._name, "object": key})
            return None
        return parsed

    def _list(self) -> None:
        items: dict[str, tuple[str, T]] = {}
        token, list_rv, limit = "", "", self._page_size
        while True:
            try:
                page = self._api.list(
                    namespace=self._namespace,
                    label_selector=self._label_selector,
                    field_selector=self._field_selector,
                    limit=limit,
                    continue_token=token,
                )
            except errors.Gone:
                if not token:
                    raise
                # The continue token expired between pages: list everything in one go instead.
                items.clear()
                token, list_rv, limit = "", "", 0
                continue
            list_rv = list_rv or page.resource_version
            for obj in page.items:
                key = object_key(obj)
                rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
                parsed = self._decode(obj, key)
                if parsed is not None:
                    items[key] = (rv, parsed)
                elif (kept := self.store.get(key)) is not None:
                    items[key] = (self.store.resource_version(key) or "", kept)
            token = page.continue_token
            if not token:
                break
        changes = self.store.replace(items)
        with self._lock:
            self._lists_in_flight += 1
        for change in changes:
            if change.new is None:
                self._queue.put(("delete", change.key, change.old, None))
            else:
                self._queue.put(("add" if change.old is None else "update", change.key, change.old, change.new))
        self.resource_version = list_rv
        self.lists += 1
        if not self._synced.is_set():
            self._queue.put(("synced", "", None, None))
        self._queue.put(("listed", "", None, None))
        log.log(V(4), "Listed", extra={"resource": self._name, "objects": len(items), "changes": len(changes)})

    def _watch(self) -> bool:
        """Watch until the stream ends; True if it delivered anything (the connection works)."""
        stream = self._api.watch(
            namespace=self._namespace,
            resource_version=self.resource_version,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            timeout_seconds=random.randint(*self._watch_timeout),
        )
        with self._lock:
            self._stream = stream
        if self._stop.is_set():
            stream.close()
        progressed = False
        try:
            for event in stream:
                progressed = True
                self._apply(event.type, event.object)
        finally:
            with self._lock:
                self._stream = None
            stream.close()
        return progressed

    def _apply(self, kind: str, obj: Obj) -> None:
        if kind == "ERROR":
            raise errors.from_status(int(obj.get("code") or 500), obj)
        meta = obj.get("metadata") or {}
        rv = str(meta.get("resourceVersion", ""))
        if kind == "BOOKMARK":
            self.resource_version = rv or self.resource_version
            return
        key = object_key(obj)
        if not key:
            log.warning("Skipping event without a name", extra={"resource": self._name, "type": kind})
            return
        if kind == "DELETED":
            old = self.store.delete(key)
            if old is not None:
                final = self._decode(obj, key)
                self._queue.put(("delete", key, final if final is not None else old, None))
        elif kind in ("ADDED", "MODIFIED"):
            if self.store.resource_version(key) != rv:
                parsed = self._decode(obj, key)
                if parsed is not None:
                    old = self.store.upsert(key, rv, parsed)
                    self._queue.put(("add" if old is None else "update", key, old, parsed))
        else:
            log.warning("Unknown watch event type", extra={"resource": self._name, "type": kind})
        self.resource_version = rv or self.resource_version

    # --- the dispatcher thread ---------------------------------------------------------------------
    def _dispatch(self) -> None:
        period = self._resync_period
        next_resync = time.monotonic() + period if period > 0 else None
        while True:
            timeout = None if next_resync is None else max(0.0, next_resync - time.monotonic())
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                for obj in list(self._delivered.values()):
                    self._notify(self._handlers, "on_update", obj, obj)
                next_resync = time.monotonic() + period
                continue
            if item is _STOP:
                return
            kind, key, old, new = item
            if kind == "register":
                self._handlers = [*self._handlers, old]
                for obj in list(self._delivered.values()):
                    self._notify([old], "on_add", obj)
            elif kind == "synced":
                self._synced.set()
                self._answered.set()
            elif kind == "listed":
                with self._lock:
                    self._lists_in_flight -= 1
            elif kind == "add":
                self._delivered[key] = new
                self._notify(self._handlers, "on_add", new)
            elif kind == "update":
                self._delivered[key] = new
                self._notify(self._handlers, "on_update", old, new)
            elif kind == "delete":
                self._delivered.pop(key, None)
                self._notify(self._handlers, "on_delete", old)

    def _notify(self, handlers: list[Handlers[T]], event: str, *args: T) -> None:
        for handler in handlers:
            callback = getattr(handler, event)
            if callback is None:
                continue
            try:
                callback(*args)
            except Exception:
                log.exception("Informer handler failed", extra={"resource": self._name, "handler": event})


class InformerFactory:
    """Shares informers within one process: asking twice for the same watch returns one informer.

    A scheduler, its plugins and its binder may all need pods; with a factory they share one list,
    one watch and one cache. Start them together, wait for all to sync, stop them together.
    """

    def __init__(self, client: Client, *, resync_period: float = 0.0) -> None:
        self._client = client
        self._resync_period = resync_period
        self._informers: dict[tuple[Any, ...], Informer[Any]] = {}
        self._started = False
        self._lock = threading.Lock()

    def informer(
        self,
        gvr: GroupVersionResource,
        *,
        parse: Callable[[Obj], T],
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        indexers: Mapping[str, Indexer[T]] | None = None,
    ) -> Informer[T]:
        """The shared informer for this watch; `indexers` are added to it if missing."""
        key = (gvr, parse, namespace, label_selector, field_selector)
        with self._lock:
            informer: Informer[T] | None = self._informers.get(key)
            if informer is None:
                informer = Informer(
                    self._client,
                    gvr,
                    parse=parse,
                    namespace=namespace,
                    label_selector=label_selector,
                    field_selector=field_selector,
                    resync_period=self._resync_period,
                )
                self._informers[key] = informer
                if self._started:
                    informer.start()
        for name, indexer in (indexers or {}).items():
            with contextlib.suppress(ValueError):  # already there: another user asked for it
                informer.store.add_indexer(name, indexer)
        return informer

    def start(self) -> None:
        with self._lock:
            self._started = True
            for informer in self._informers.values():
                if not informer.started:
                    informer.start()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in list(self._informers.values()):
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.wait_for_sync(remaining):
                return False
        return True

    def stop(self) -> None:
        with self._lock:
            informers = list(self._informers.values())
        for informer in informers:
            informer.stop()
