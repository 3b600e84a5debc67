"""The node's NodeSLO object (`slo.koordinator.sh/v1alpha1`, named after the node), watched.

Koordinator clusters configure node QoS through this object, which the slo-controller writes
from the `slo-controller-config` ConfigMap (or a user writes by hand). `NodeSLOWatch` keeps an
Informer on the one object (fieldSelector `metadata.name=<node>`), parses each version with
agent.qos.config and hands the result, a `sources.Loaded`, to its subscriber (agent.qos.node,
which decides with agent.qos.sources what is in force). `NodeSLOReader` is that parsing step:
a version that does not parse is bad input the agent survives — a warning log line and a
`FailedParsing` Warning Event on the NodeSLO, both naming every bad field — and the subscriber
keeps the last good config.

Threads: the informer's dispatcher thread calls the reader and the subscriber, one change at a
time, in order.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from agent.qos import config
from agent.qos.sources import ABSENT, Loaded
from apis.errors import TesseraError
from apis.extension import names
from kube.client import Client
from kube.events import ObjectReference
from kube.informer import Informer, raw
from kube.logs import V

__all__ = ["REASON_INVALID", "EventSink", "NodeSLOReader", "NodeSLOWatch"]

log = logging.getLogger(__name__)

#: The Event reason on a NodeSLO the agent cannot read (the scheduler uses it for Device CRs too).
REASON_INVALID: Final = "FailedParsing"


class EventSink(Protocol):
    """Where Warning events go: a kube.events.EventRecorder."""

    def warning(self, ref: ObjectReference, reason: str, message: str) -> None: ...


class NodeSLOReader:
    """Parses one NodeSLO version; reports a bad one (log + Event). No I/O of its own."""

    def __init__(self, *, node_name: str, events: EventSink | None) -> None:
        self._node_name = node_name
        self._events = events

    def read(self, obj: Mapping[str, Any] | None) -> Loaded:
        """`obj` as the API server returns it, or None when there is none (deleted). Never raises."""
        if obj is None:
            return ABSENT
        raw_meta = obj.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
        name = str(meta.get("name", self._node_name))
        version = str(meta.get("resourceVersion", ""))
        try:
            parsed = config.parse(obj, source=f"NodeSLO {name}")
        except TesseraError as e:  # ConfigError, or any other parse problem: bad input, never a crash
            log.warning(
                "Invalid NodeSLO; the last good QoS config stays in force",
                extra={"nodeslo": name, "resourceVersion": version, "error": str(e)},
            )
            self._report(meta, name, e)
            return Loaded(present=True)
        log.log(V(2), "Read NodeSLO", extra={"nodeslo": name, "resourceVersion": version})
        return Loaded(present=True, config=parsed)

    def _report(self, meta: Mapping[str, Any], name: str, error: TesseraError) -> None:
        """A Warning Event on the NodeSLO, every bad field on one line (`kubectl describe nodeslo`)."""
        if self._events is None:
            return
        ref = ObjectReference(
            names.NODE_SLOS.kind,
            name,
            uid=str(meta.get("uid", "")),
            api_version=names.NODE_SLOS.api_version,
            resource_version=str(meta.get("resourceVersion", "")),
        )
        detail = str(error).replace(":\n  ", ": ", 1).replace("\n  ", "; ")
        message = f"the agent of node {self._node_name} cannot read this NodeSLO; the last good QoS config stays"
        self._events.warning(ref, REASON_INVALID, f"{message} in force: {detail}")


class NodeSLOWatch:
    """The node's NodeSLO, kept current by an Informer; `subscribe` to hear each change.

    `start()` lists it (waiting a bounded time, so the first QoS decision can include it);
    `current` is the latest version read; `stop()` is idempotent.
    """

    def __init__(self, client: Client, *, node_name: str, events: EventSink | None) -> None:
        self._reader = NodeSLOReader(node_name=node_name, events=events)
        self._informer: Informer[dict[str, Any]] = Informer(
            client, names.NODE_SLOS, parse=raw, field_selector=f"metadata.name={node_name}"
        )
        self._informer.add_handlers(self._changed, self._updated, self._deleted)
        self._lock = threading.Lock()
        self._current = ABSENT
        self._subscriber: Callable[[Loaded], None] | None = None
        self._node_name = node_name

    @property
    def current(self) -> Loaded:
        with self._lock:
            return self._current

    def start(self, *, sync_timeout_s: float) -> bool:
        """Start watching; wait up to `sync_timeout_s` for the first list. False (logged) when the
        API server did not answer in time: the watch goes on, and the NodeSLO applies when it comes."""
        self._informer.start()
        synced = self._informer.wait_for_sync(sync_timeout_s)
        if not synced:
            log.warning(
                "NodeSLO not listed yet; node QoS starts from the file or the defaults",
                extra={"node": self._node_name, "waited_s": sync_timeout_s},
            )
        return synced

    def subscribe(self, callback: Callable[[Loaded], None]) -> None:
        """Call `callback(loaded)` now with the current version, then on each change, in order
        (one subscriber). The callback runs under this watch's lock: it must not call back in."""
        with self._lock:
            self._subscriber = callback
            callback(self._current)

    def stop(self) -> None:
        self._informer.stop()
        with self._lock:
            self._subscriber = None

    def _changed(self, obj: dict[str, Any]) -> None:
        self._set(self._reader.read(obj))

    def _updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._set(self._reader.read(new))

    def _deleted(self, obj: dict[str, Any]) -> None:
        log.info("NodeSLO deleted; node QoS falls back to the file or the defaults", extra={"node": self._node_name})
        self._set(ABSENT)

    def _set(self, loaded: Loaded) -> None:
        with self._lock:
            self._current = loaded
            if self._subscriber is not None:
                self._subscriber(loaded)
