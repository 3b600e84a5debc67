"""Feeds: the objects plugins watch, and the cluster events they say happened — registered by
the plugins through `Handle.feeds`, run by whoever drives the scheduler.

The scheduling core does no I/O, so a plugin never opens an informer. At construction it says
what it must watch (`Watch`: a resource, optionally one namespace and a field selector, and how
to parse an object) and what to do with each change (`Handlers`); `Feeds`, one per scheduler and
shared by every profile's plugins, keeps the registrations. The live scheduler opens one informer
per distinct watch (`scheduler.service.feeds`) and calls every handler registered on it under the
cache lock, so handlers may change the cache and the plugin's own state; it waits for the first
list of every watch some handler `opens` before it schedules. The offline drivers (what-if,
simulate, bench) open none: they hand the objects they read to the same handlers
(`Feeds.deliver`: PodGroups) or fill what the plugins keep directly (the quota manager, the
cache's Reservations).

Handlers say what their change means for pods waiting to be scheduled with `Feeds.emit(event)`:
a `ClusterEvent` of the plugin's own vocabulary (`QUOTA_CHANGED`, `RESERVATION_PLACED`), which
the live scheduler turns into queue moves once the lock is released (pods rejected by a plugin
that registered the event move; `concerns` names pods that move whatever rejected them: the
owners of a Reservation just placed). An object that does not parse is kept at its last valid
version by the informer and told to every handler's `invalid`, which says so where people look
(`Feeds.warn`: a Warning Event on the object, live; a log line offline).

A recipe — how a plugin gets its feed:

1. a `Watch` naming the resource (its GroupVersionResource from `apis.extension.names`: the core
   may not import `kube`) and the `apis` parser of its objects;
2. `Handlers` whose callbacks update what the plugin keeps (under the cache lock) and `emit` the
   plugin's events; `synced` for work after the first list, `invalid` for an object that does
   not parse, `opens=False` to follow a watch only when something else opens it;
3. in the plugin's `new(args, handle)`: `handle.feeds.watch(WATCH, handlers, key=...)` — with a
   key when the state the handlers feed is shared by every profile's instance (once is enough);
   `handle.feeds.pods(handlers)` for the pods the scheduler already watches;
4. the events it emits in the plugin's `events_to_register` (and in those of the plugins they
   concern), and the RBAC to list and watch the resource in deploy/ and the Helm chart.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from apis.errors import TesseraError
from apis.extension.names import GroupVersionResource
from apis.k8s.core import Pod
from apis.k8s.meta import ObjectMeta
from scheduler.framework.events import ClusterEvent

__all__ = ["About", "Concerns", "Feeds", "Handlers", "Recorder", "Sink", "Watch"]

log = logging.getLogger(__name__)

T = TypeVar("T")
#: The pods an event concerns whatever rejected them (a Reservation's owners); None: none such.
Concerns = Callable[[Pod], bool] | None
#: Where emitted events go (the live scheduler's queue).
Sink = Callable[[ClusterEvent, Concerns], None]


@dataclass(frozen=True, slots=True)
class Watch(Generic[T]):
    """What to list and watch, and how to parse one object (`apis`' parser: raises
    TesseraError for an object it cannot read)."""

    resource: GroupVersionResource
    parse: Callable[[dict[str, Any]], T]
    namespace: str = ""
    field_selector: str = ""
    #: Whether scheduling waits for its first list (False: a cluster without the CRD still schedules).
    required: bool = True

    @property
    def key(self) -> tuple[GroupVersionResource, str, str]:
        """What makes two watches one informer."""
        return self.resource, self.namespace, self.field_selector


def _ignore(*_args: object) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Handlers(Generic[T]):
    """What a plugin does with each change of a watched object. Every callback but `invalid` runs
    under the cache lock, on the informer's thread; none may raise (a bug is logged)."""

    added: Callable[[T], None] = _ignore
    updated: Callable[[T, T], None] = _ignore
    deleted: Callable[[T], None] = _ignore
    #: Once, after the first list was delivered (a watch the scheduler waits for only).
    synced: Callable[[], None] = _ignore
    #: An object that does not parse (the raw object, the error); runs without the lock.
    invalid: Callable[[Mapping[str, Any], TesseraError], None] = _ignore
    #: Whether these handlers make the scheduler open the watch (False: they follow it only
    #: when other handlers open it).
    opens: bool = True


@dataclass(frozen=True, slots=True)
class About:
    """The object a warning is about, as an Event names it."""

    resource: GroupVersionResource
    name: str
    namespace: str = ""
    uid: str = ""

    @classmethod
    def of(cls, resource: GroupVersionResource, meta: ObjectMeta) -> About:
        return cls(resource, meta.name, meta.namespace, meta.uid)

    @classmethod
    def raw(cls, resource: GroupVersionResource, raw: Mapping[str, Any]) -> About:
        """An object that did not parse, named from whatever its metadata says."""
        found = raw.get("metadata")
        meta: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        return cls(resource, str(meta.get("name", "")), str(meta.get("namespace", "")), str(meta.get("uid", "")))


class Recorder(Protocol):
    """Where a warning about an object goes (live: a Warning Event on it)."""

    def warning(self, about: About, reason: str, message: str) -> None: ...


class _LogRecorder:
    """Offline: a warning is a log line."""

    def warning(self, about: About, reason: str, message: str) -> None:
        log.warning(message, extra={"object": f"{about.resource.kind} {about.name}", "reason": reason})


@dataclass(slots=True)
class _Registered(Generic[T]):
    watch: Watch[T]
    handlers: list[Handlers[T]] = field(default_factory=list)
    #: Whether a registration that opens the watch requires its first list.
    required: bool = False


class Feeds:
    """The feeds every profile's plugins registered, and where their events and warnings go.
    Registration happens while the frameworks are built (one thread); `connect` before the
    informers start."""

    def __init__(self) -> None:
        self._watches: dict[tuple[GroupVersionResource, str, str], _Registered[Any]] = {}
        self._pods: list[Handlers[Pod]] = []
        self._keys: set[Hashable] = set()
        self._sink: Sink = lambda _event, _concerns: None
        self._recorder: Recorder = _LogRecorder()

    # --- registration (plugins, at construction) ------------------------------------------------
    def watch(self, watch: Watch[T], handlers: Handlers[T], *, key: Hashable | None = None) -> None:
        """Call `handlers` on every change of what `watch` lists. With a `key`, once: another
        registration under the same key is ignored (every profile's instance of a plugin that
        feeds state they share registers; one is enough). Raises ValueError for a watch of the
        same objects with another parser (one informer parses them once)."""
        if self._claim(key):
            return
        registered = self._watches.get(watch.key)
        if registered is None:
            registered = self._watches[watch.key] = _Registered(watch)
        elif registered.watch.parse != watch.parse:
            raise ValueError(f"{watch.resource.plural} is watched with two parsers")
        registered.handlers.append(handlers)
        registered.required = registered.required or (handlers.opens and watch.required)

    def pods(self, handlers: Handlers[Pod], *, key: Hashable | None = None) -> None:
        """Call `handlers` on every change of a (non-terminal) pod the scheduler watches anyway."""
        if not self._claim(key):
            self._pods.append(handlers)

    def _claim(self, key: Hashable | None) -> bool:
        """Whether `key` was registered under before (then nothing more is)."""
        if key is None:
            return False
        if key in self._keys:
            return True
        self._keys.add(key)
        return False

    # --- what handlers call -----------------------------------------------------------------------
    def emit(self, event: ClusterEvent, *, concerns: Concerns = None) -> None:
        """Say that `event` happened (see the module docstring); nothing happens offline."""
        self._sink(event, concerns)

    def warn(self, about: About, reason: str, message: str) -> None:
        """Say what is wrong with an object where people look."""
        self._recorder.warning(about, reason, message)

    # --- the driver ---------------------------------------------------------------------------------
    def connect(self, *, sink: Sink, recorder: Recorder) -> None:
        """Where events and warnings go from now on (the live scheduler, before it starts)."""
        self._sink = sink
        self._recorder = recorder

    def opened(self) -> list[tuple[Watch[Any], list[Handlers[Any]]]]:
        """The watches some handler opens, each with all its handlers."""
        return [
            (dataclasses.replace(r.watch, required=r.required), list(r.handlers))
            for r in self._watches.values()
            if any(h.opens for h in r.handlers)
        ]

    def pod_handlers(self) -> list[Handlers[Pod]]:
        return list(self._pods)

    def deliver(self, resource: GroupVersionResource, obj: object, *, deleted: bool = False) -> None:
        """Offline: hand one parsed object of `resource` to the handlers of every watch of it
        that is opened, as its informer's add (or, `deleted`, delete) would — whatever the
        watch's namespace or selector: the caller gives only what they would list. A handler
        that raises is a bug in its plugin: logged, as live."""
        for watch, handlers in self.opened():
            if watch.resource != resource:
                continue
            for handler in handlers:
                try:
                    (handler.deleted if deleted else handler.added)(obj)
                except Exception:
                    log.exception("A plugin's feed handler failed", extra={"resource": resource.plural})
