"""GPU shared-resource templates from their ConfigMaps, fed into the scheduler's cache.

DeviceShare names the ConfigMap it reads the templates from (its `gpuSharedResourceTemplatesConfig`
argument; Koordinator's default `koordinator-system/gpu-shared-resource-templates`) and says so to
the cache (`ClusterCache.templates.want`). This feed watches each such ConfigMap — one informer
each, on that namespace and name only — and puts its parsed `data.yaml` into the cache. The
scheduler waits for them to sync before it schedules, as Koordinator does, so a pod that must
match a template is never refused for a ConfigMap not read yet.

A ConfigMap whose templates do not parse keeps the last valid ones (the informer's rule, and
Koordinator's) and gets a Warning Event naming the problem. A ConfigMap deleted takes its
templates with it. Any change moves the pods DeviceShare refused back to the active queue.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from apis.errors import TesseraError
from apis.extension import sharedtemplates
from apis.extension.sharedtemplates import Templates
from kube import Client, EventRecorder, Informer, ObjectReference, resources
from scheduler.cache import ClusterCache
from scheduler.framework.interfaces import ClusterEvent, EventAction, EventResource
from scheduler.service.queue import SchedulingQueue

__all__ = ["REASON_INVALID_TEMPLATES", "TemplateFeed"]

log = logging.getLogger(__name__)

REASON_INVALID_TEMPLATES = "InvalidGPUSharedResourceTemplates"
_CHANGED = ClusterEvent(EventResource.CONFIG_MAP, EventAction.ALL)
_KEEPS_THE_LAST = "the scheduler cannot read these GPU shared-resource templates; it keeps the last valid ones"


@dataclass(frozen=True, slots=True)
class _Parsed:
    ref: str
    templates: Templates


class TemplateFeed:
    """One informer per ConfigMap the cache's `templates.wanted()` names (none: nothing watched)."""

    def __init__(
        self,
        client: Client,
        *,
        lock: threading.RLock,
        cache: ClusterCache,
        queue: SchedulingQueue,
        recorder: EventRecorder,
    ) -> None:
        self._lock = lock
        self._cache = cache
        self._queue = queue
        self._recorder = recorder
        self.informers: list[Informer[_Parsed]] = []
        for ref in sorted(cache.templates.wanted()):
            namespace, _, name = ref.partition("/")
            informer: Informer[_Parsed] = Informer(
                client,
                resources.CONFIG_MAPS,
                parse=self._parse,
                namespace=namespace,
                field_selector=f"metadata.name={name}",
            )
            informer.add_handlers(self._changed, lambda _old, new: self._changed(new), self._deleted)
            self.informers.append(informer)

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return all(informer.wait_for_sync(timeout) for informer in self.informers)

    def stop(self) -> None:
        for informer in self.informers:
            if informer.started:
                informer.stop()

    def _parse(self, raw: dict[str, Any]) -> _Parsed:
        found = raw.get("metadata")
        meta: dict[str, Any] = found if isinstance(found, dict) else {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        data = raw.get("data")
        try:
            if data is not None and not isinstance(data, dict):
                raise TesseraError("data: expected a map of strings")
            templates = sharedtemplates.parse(data or {}, obj=f"configmap {namespace}/{name}")
        except TesseraError as e:
            ref = ObjectReference("ConfigMap", name, namespace, str(meta.get("uid", "")), "v1")
            message = (
                f"the scheduler cannot read these GPU shared-resource templates; it keeps the last valid ones: {e}"
            )
            log.warning(
                "Invalid GPU shared-resource templates", extra={"configmap": f"{namespace}/{name}", "error": str(e)}
            )
            self._recorder.warning(ref, REASON_INVALID_TEMPLATES, message)
            raise
        return _Parsed(f"{namespace}/{name}", templates)

    def _changed(self, parsed: _Parsed) -> None:
        with self._lock:
            self._cache.templates.put(parsed.ref, parsed.templates)
        log.info("GPU shared-resource templates", extra={"configmap": parsed.ref, "models": len(parsed.templates)})
        self._queue.move(_CHANGED)

    def _deleted(self, parsed: _Parsed) -> None:
        with self._lock:
            self._cache.templates.clear(parsed.ref)
        self._queue.move(_CHANGED)
