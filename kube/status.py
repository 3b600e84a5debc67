"""Writing an object's status where its resource keeps it.

A resource with a status subresource keeps status apart: a write of the object ignores it and
only `/status` changes it. Without one, `/status` does not exist and status is written with the
object. Koordinator's CRDs for Device, ElasticQuota and PodGroup have none (its components
merge-patch status through the object), and Tessera's follow them; a cluster may still carry
CRDs that have one (an older Tessera's). `StatusWriter` works against both: it asks discovery
(`GET /apis/GROUP/VERSION`, open to every authenticated client) whether `PLURAL/status` is
served, remembers the answer, and asks again when a write shows the answer went stale — `/status`
answering 404 for an object that exists, or a write of the object coming back without the status
it carried (the CRD gained the subresource; asked at most every `recheck` seconds, since a schema
that prunes a field, as Koordinator's prunes an ElasticQuota's conditions, looks the same) — then
writes again the right way. Thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kube import errors
from kube.logs import V
from kube.resources import MERGE_PATCH, Obj, Patch, ResourceAPI

__all__ = ["StatusAwareAPI", "StatusWriter"]

log = logging.getLogger(__name__)


class StatusWriter:
    """Merge-patches `{"status": ...}` (with `metadata` beside it if wanted) into objects of one
    resource, through `/status` or through the object, whichever the resource keeps status in."""

    def __init__(self, api: ResourceAPI, *, recheck: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self._recheck = recheck
        self._clock = clock
        self._lock = threading.Lock()
        self._subresource: bool | None = None
        self._asked_at = 0.0

    def has_subresource(self, *, refresh: bool = False) -> bool:
        """Whether the resource serves `/status` (asked once, or again with `refresh`). Raises
        APIError when discovery fails."""
        with self._lock:
            known = self._subresource
        if known is not None and not refresh:
            return known
        gvr = self.api.gvr
        path = f"/apis/{gvr.group}/{gvr.version}" if gvr.group else f"/api/{gvr.version}"
        found = self.api.client.request("GET", path)
        served = {str(r.get("name")) for r in found.get("resources") or () if isinstance(r, Mapping)}
        answer = f"{gvr.plural}/status" in served
        with self._lock:
            changed = self._subresource is not None and self._subresource != answer
            self._subresource = answer
            self._asked_at = self._clock()
        if changed:
            log.info("Status subresource changed", extra={"resource": gvr.plural, "subresource": answer})
        return answer

    def patch(self, name: str, patch: dict[str, Any], *, namespace: str = "") -> Obj:
        """Merge-patch the object's status; the object as written. Raises NotFound when the
        object does not exist, APIError for other refusals."""
        if self.has_subresource():
            try:
                return self.api.patch(name, patch, namespace=namespace, subresource="status")
            except errors.NotFound:
                if self.has_subresource(refresh=True):
                    raise  # the object is gone
                log.log(V(2), "Status subresource gone; writing status with the object", extra={"object": name})
        written = self.api.patch(name, patch, namespace=namespace, patch_type=MERGE_PATCH)
        stale = not _carries(written.get("status"), patch.get("status")) and self._may_recheck()
        if stale and self.has_subresource(refresh=True):
            return self.api.patch(name, patch, namespace=namespace, subresource="status")
        return written

    def _may_recheck(self) -> bool:
        with self._lock:
            return self._clock() - self._asked_at >= self._recheck


def _carries(stored: object, patch: object) -> bool:
    """Whether `stored` shows the merge `patch` applied (null in the patch: the key is gone)."""
    if not isinstance(patch, Mapping):
        return patch is None or stored == patch
    if not isinstance(stored, Mapping):
        return all(v is None for v in patch.values())
    return all((k not in stored) if v is None else _carries(stored.get(k), v) for k, v in patch.items())


class StatusAwareAPI(ResourceAPI):
    """A `ResourceAPI` whose merge patches of `/status` go where the resource keeps status
    (`StatusWriter`): components keep writing `patch(..., subresource="status")` and work
    against CRDs with and without the subresource."""

    def __init__(self, api: ResourceAPI) -> None:
        super().__init__(api.client, api.gvr)
        self.status = StatusWriter(api)

    def patch(
        self, name: str, patch: Patch, *, namespace: str = "", patch_type: str = MERGE_PATCH, subresource: str = ""
    ) -> Obj:
        if subresource == "status" and patch_type == MERGE_PATCH and isinstance(patch, dict):
            return self.status.patch(name, patch, namespace=namespace)
        return super().patch(name, patch, namespace=namespace, patch_type=patch_type, subresource=subresource)
