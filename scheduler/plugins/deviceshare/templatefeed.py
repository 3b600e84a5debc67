"""GPU shared-resource templates from their ConfigMap, fed into the scheduler's cache: DeviceShare's
feed (`scheduler.framework.feeds`).

DeviceShare names the ConfigMap it reads the templates from (its `gpuSharedResourceTemplatesConfig`
argument; Koordinator's default `koordinator-system/gpu-shared-resource-templates`) and watches it
— that namespace and name only — putting its parsed `data.yaml` into the cache
(`ClusterCache.templates`, where snapshots copy it from). The scheduler waits for the first list
before it schedules, as Koordinator does, so a pod that must match a template is never refused
for a ConfigMap not read yet.

A ConfigMap whose templates do not parse keeps the last valid ones (the informer's rule, and
Koordinator's) and gets a Warning Event naming the problem. A ConfigMap deleted takes its
templates with it. Any change moves the pods DeviceShare refused (`TEMPLATES_CHANGED`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from apis.errors import TesseraError
from apis.extension import sharedtemplates
from apis.extension.names import CONFIG_MAPS
from apis.extension.sharedtemplates import Templates
from scheduler.cache import ClusterCache
from scheduler.framework.events import ClusterEvent, EventAction
from scheduler.framework.feeds import About, Feeds, Handlers, Watch

__all__ = ["REASON_INVALID_TEMPLATES", "TEMPLATES_CHANGED", "watch_templates"]

log = logging.getLogger(__name__)

REASON_INVALID_TEMPLATES: Final = "InvalidGPUSharedResourceTemplates"
#: The ConfigMap of GPU shared-resource templates was created, changed or deleted.
TEMPLATES_CHANGED: Final = ClusterEvent(CONFIG_MAPS.kind, EventAction.ALL, "GPUSharedResourceTemplatesChange")


@dataclass(frozen=True, slots=True)
class _Parsed:
    ref: str
    templates: Templates


def _parse(raw: dict[str, Any]) -> _Parsed:
    found = raw.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    data = raw.get("data")
    if data is not None and not isinstance(data, dict):
        raise TesseraError("data: expected a map of strings")
    return _Parsed(f"{namespace}/{name}", sharedtemplates.parse(data or {}, obj=f"configmap {namespace}/{name}"))


def watch_templates(feeds: Feeds, cache: ClusterCache, ref: str) -> None:
    """Keep the templates of the ConfigMap `ref` (`namespace/name`) in `cache` (once per ref,
    whichever profile's DeviceShare asks first)."""
    namespace, _, name = ref.partition("/")

    def changed(parsed: _Parsed) -> None:
        cache.templates.put(parsed.ref, parsed.templates)
        log.info("GPU shared-resource templates", extra={"configmap": parsed.ref, "models": len(parsed.templates)})
        feeds.emit(TEMPLATES_CHANGED)

    def deleted(parsed: _Parsed) -> None:
        cache.templates.clear(parsed.ref)
        feeds.emit(TEMPLATES_CHANGED)

    def invalid(raw: Mapping[str, Any], error: TesseraError) -> None:
        message = (
            f"the scheduler cannot read these GPU shared-resource templates; it keeps the last valid ones: {error}"
        )
        feeds.warn(About.raw(CONFIG_MAPS, raw), REASON_INVALID_TEMPLATES, message)

    watch = Watch(CONFIG_MAPS, _parse, namespace=namespace, field_selector=f"metadata.name={name}")
    handlers = Handlers(added=changed, updated=lambda _old, new: changed(new), deleted=deleted, invalid=invalid)
    feeds.watch(watch, handlers, key=("DeviceShare/templates", ref))
