"""The plugins' feeds, run for the live scheduler: one informer per watch the plugins registered
(`scheduler.framework.feeds`), their handlers called under the cache lock, the events they emit
turned into queue moves once the lock is released, their warnings into Warning Events.

Nothing here knows a plugin: what is watched, and what a change means, is the plugins' (their
`new()` registers it through `Handle.feeds`). Handlers registered on the scheduler's own pod
informer (`Feeds.pods`) are added to the `ClusterFeed`'s. A handler that raises is a bug in a
plugin: it is logged with its stack and the informer goes on, as a plugin's exception in a cycle
becomes an ERROR status.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from apis.errors import TesseraError
from apis.extension.names import GroupVersionResource
from apis.k8s.core import Pod
from kube import Client, EventRecorder, Informer, ObjectReference
from scheduler.framework.events import ClusterEvent
from scheduler.framework.feeds import About, Concerns, Feeds, Handlers, Watch
from scheduler.service.queue import SchedulingQueue

__all__ = ["PluginFeeds"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class PluginFeeds:
    """Informers for every watch some plugin opens; `start()`, `wait_for_sync()`, `stop()`."""

    def __init__(
        self,
        client: Client,
        feeds: Feeds,
        *,
        lock: threading.RLock,
        queue: SchedulingQueue,
        recorder: EventRecorder,
        pods: Informer[Pod],
    ) -> None:
        """`pods` is the scheduler's own pod informer (the handlers of `Feeds.pods` join it)."""
        self._lock = lock
        self._queue = queue
        self._recorder = recorder
        self._local = threading.local()
        feeds.connect(sink=self._emit, recorder=_EventRecorder(recorder))
        self._informers: list[tuple[Informer[Any], Watch[Any], list[Handlers[Any]]]] = []
        for watch, handlers in feeds.opened():
            informer: Informer[Any] = Informer(
                client,
                watch.resource,
                parse=self._parser(watch, handlers),
                namespace=watch.namespace,
                field_selector=watch.field_selector,
            )
            self._attach(informer, handlers)
            self._informers.append((informer, watch, handlers))
        self._attach(pods, feeds.pod_handlers())

    def informer(self, resource: GroupVersionResource) -> Informer[Any] | None:
        """The informer of `resource` (all namespaces, no selector) if a plugin opened one."""
        for informer, watch, _ in self._informers:
            if watch.resource == resource and not watch.namespace and not watch.field_selector:
                return informer
        return None

    def start(self) -> None:
        for informer, _, _ in self._informers:
            informer.start()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait for the first list of every watch that requires it, then tell their handlers
        (`Handlers.synced`). A resource the server does not serve (a kind of a newer Kubernetes,
        an optional CRD) has no objects to wait for: its handlers are told at once, and its
        objects arrive like any others once it is served. False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer, watch, handlers in self._informers:
            if not watch.required:
                continue
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.wait_until_answered(remaining):
                return False
            for handler in handlers:
                self._call(handler.synced)
        return True

    @property
    def synced(self) -> bool:
        return all(
            informer.has_synced or informer.not_served for informer, watch, _ in self._informers if watch.required
        )

    def stop(self) -> None:
        for informer, _, _ in self._informers:
            if informer.started:
                informer.stop()

    # --- plumbing ---------------------------------------------------------------------------------------
    def _attach(self, informer: Informer[T], handlers: list[Handlers[T]]) -> None:
        for handler in handlers:
            informer.add_handlers(*self._wrapped(handler))

    def _wrapped(self, handler: Handlers[T]) -> tuple[Callable[[T], None], Callable[[T, T], None], Callable[[T], None]]:
        def added(obj: T) -> None:
            self._call(handler.added, obj)

        def updated(old: T, new: T) -> None:
            self._call(handler.updated, old, new)

        def deleted(obj: T) -> None:
            self._call(handler.deleted, obj)

        return added, updated, deleted

    def _parser(self, watch: Watch[T], handlers: list[Handlers[T]]) -> Callable[[dict[str, Any]], T]:
        def parse(raw: dict[str, Any]) -> T:
            try:
                return watch.parse(raw)
            except TesseraError as e:
                for handler in handlers:
                    self._guard(handler.invalid, raw, e)
                raise

        return parse

    def _call(self, callback: Callable[..., None], *args: object) -> None:
        """One handler call under the cache lock; the events it emits go to the queue after."""
        emitted: list[tuple[ClusterEvent, Concerns]] = []
        self._local.emitted = emitted
        try:
            with self._lock:
                self._guard(callback, *args)
        finally:
            self._local.emitted = None
        for event, concerns in emitted:
            self._queue.move(event, concerns=concerns)

    def _emit(self, event: ClusterEvent, concerns: Concerns) -> None:
        emitted = getattr(self._local, "emitted", None)
        if emitted is not None:
            emitted.append((event, concerns))
        else:
            self._queue.move(event, concerns=concerns)

    @staticmethod
    def _guard(callback: Callable[..., None], *args: object) -> None:
        try:
            callback(*args)
        except Exception:
            log.exception("A plugin's feed handler failed", extra={"handler": getattr(callback, "__qualname__", "")})


class _EventRecorder:
    """`scheduler.framework.feeds.Recorder` as Warning Events (and a log line)."""

    def __init__(self, recorder: EventRecorder) -> None:
        self._recorder = recorder

    def warning(self, about: About, reason: str, message: str) -> None:
        where = f"{about.resource.kind} {_key(about)}"
        log.warning("Invalid object", extra={"object": where, "reason": reason, "problem": message})
        ref = ObjectReference(about.resource.kind, about.name, about.namespace, about.uid, about.resource.api_version)
        self._recorder.warning(ref, reason, message)


def _key(about: About) -> str:
    return f"{about.namespace}/{about.name}" if about.namespace else about.name
