"""Recording Kubernetes Events (core/v1) on the objects they concern, as client-go's recorder does.

What users must see — why a pod is pending, that a GPU went unhealthy — becomes an Event on the
pod or node (`kubectl describe` shows it). Recording never blocks the caller: events go through
a bounded queue to a background thread, and are best effort (dropped, with a log line, when the
queue is full or the API server refuses). Repeats of the same event (same object, type, reason
and message) within `aggregation_window` update one Event's `count` and `lastTimestamp` instead of
creating new objects, like Kubernetes' event correlator.
"""

from __future__ import annotations

import collections
import datetime
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from apis.crds.device import Device
from apis.crds.elasticquota import ElasticQuota
from apis.crds.podgroup import PodGroup
from apis.extension import names
from apis.k8s.core import Node, Pod
from apis.k8s.meta import ObjectMeta
from kube import errors
from kube.client import Client
from kube.resources import EVENTS, MERGE_PATCH

__all__ = ["NORMAL", "WARNING", "EventRecorder", "ObjectReference"]

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
_MAX_MESSAGE = 1024
_KINDS: Mapping[type, tuple[str, str]] = {
    Pod: ("Pod", "v1"),
    Node: ("Node", "v1"),
    Device: (names.DEVICES.kind, names.DEVICES.api_version),
    ElasticQuota: (names.ELASTIC_QUOTAS.kind, names.ELASTIC_QUOTAS.api_version),
}


@dataclass(frozen=True, slots=True)
class ObjectReference:
    """The object an Event is about (core/v1 ObjectReference)."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = ""
    resource_version: str = ""

    @classmethod
    def from_meta(cls, kind: str, api_version: str, meta: ObjectMeta) -> ObjectReference:
        return cls(kind, meta.name, meta.namespace, meta.uid, api_version, meta.resource_version)

    @classmethod
    def of(cls, obj: Pod | Node | Device | ElasticQuota | PodGroup) -> ObjectReference:
        if isinstance(obj, PodGroup):  # of either API group: the object says which
            return cls.from_meta(obj.resource.kind, obj.resource.api_version, obj.meta)
        kind, api_version = _KINDS[type(obj)]
        return cls.from_meta(kind, api_version, obj.meta)

    def to_dict(self) -> dict[str, str]:
        fields = (
            ("kind", self.kind),
            ("namespace", self.namespace),
            ("name", self.name),
            ("uid", self.uid),
            ("apiVersion", self.api_version),
            ("resourceVersion", self.resource_version),
        )
        return {k: v for k, v in fields if v}


@dataclass(frozen=True, slots=True)
class _Record:
    ref: ObjectReference
    type: str
    reason: str
    message: str
    at: datetime.datetime


@dataclass(slots=True)
class _Seen:
    name: str
    namespace: str
    count: int
    last: float


_STOP = object()


class EventRecorder:
    """`recorder.event(ObjectReference.of(pod), WARNING, "FailedScheduling", "0/3 nodes ...")`."""

    def __init__(
        self,
        client: Client,
        component: str,
        *,
        host: str = "",
        queue_size: int = 1000,
        aggregation_window: float = 600.0,
        cache_size: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = client.resource(EVENTS)
        self.component = component
        self.host = host or socket.gethostname()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._window = aggregation_window
        self._cache_size = cache_size
        self._clock = clock
        self._seen: collections.OrderedDict[tuple[str, ...], _Seen] = collections.OrderedDict()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.dropped = 0

    def event(self, ref: ObjectReference, type: str, reason: str, message: str) -> None:
        """Queue an event; never blocks, never raises for API trouble."""
        if type not in (NORMAL, WARNING):
            raise ValueError(f"event type must be {NORMAL} or {WARNING}, got {type!r}")
        self._ensure_started()
        record = _Record(ref, type, reason, message[:_MAX_MESSAGE], datetime.datetime.now(datetime.UTC))
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1
            log.warning("Event dropped: queue full", extra={"object": _key(ref), "reason": reason})

    def normal(self, ref: ObjectReference, reason: str, message: str) -> None:
        self.event(ref, NORMAL, reason, message)

    def warning(self, ref: ObjectReference, reason: str, message: str) -> None:
        self.event(ref, WARNING, reason, message)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued event has been sent (or dropped); False on timeout."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Send what is queued, then stop the thread. Idempotent."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(timeout)

    def _ensure_started(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"events-{self.component}", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                self._send(item)
            except errors.APIError as e:
                self.dropped += 1
                log.warning(
                    "Event not recorded", extra={"object": _key(item.ref), "reason": item.reason, "error": str(e)}
                )
            except Exception:
                self.dropped += 1
                log.exception("Event not recorded", extra={"object": _key(item.ref), "reason": item.reason})
            finally:
                self._queue.task_done()

    def _send(self, record: _Record) -> None:
        ref = record.ref
        namespace = ref.namespace or "default"  # events about cluster-scoped objects live in default
        key = (ref.kind, namespace, ref.name, ref.uid, record.type, record.reason, record.message)
        now = self._clock()
        timestamp = record.at.strftime("%Y-%m-%dT%H:%M:%SZ")
        seen = self._seen.get(key)
        if seen is not None and now - seen.last <= self._window:
            try:
                self._api.patch(
                    seen.name,
                    {"count": seen.count + 1, "lastTimestamp": timestamp},
                    namespace=seen.namespace,
                    patch_type=MERGE_PATCH,
                )
                seen.count += 1
                seen.last = now
                self._seen.move_to_end(key)
                return
            except errors.NotFound:
                pass  # it expired or was deleted: create a new one
        name = f"{ref.name}.{time.time_ns():x}"
        self._api.create(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": ref.to_dict(),
                "reason": record.reason,
                "message": record.message,
                "type": record.type,
                "source": {"component": self.component, "host": self.host},
                "firstTimestamp": timestamp,
                "lastTimestamp": timestamp,
                "count": 1,
                "reportingComponent": self.component,
                "reportingInstance": self.host,
            },
            namespace=namespace,
        )
        self._seen[key] = _Seen(name, namespace, 1, now)
        self._seen.move_to_end(key)
        while len(self._seen) > self._cache_size:
            self._seen.popitem(last=False)


def _key(ref: ObjectReference) -> str:
    return f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
