"""ElasticQuotas and every pod's quota charge, fed into the scheduler's QuotaManager.

Only when a profile enables the ElasticQuota plugin (`SchedulerService` decides): a cluster
without the CRD is never watched for it. Quotas come from their own informer; pods from the
cluster feed's pod informer (one watch), where every non-terminal pod counts in its quota's
request and, once bound, in its used — so `used` is exact after a restart, before any cycle.

A quota that does not parse keeps its last valid version (the informer's rule); one that breaks
the tree's rules gets a Warning Event naming the rule, and its pods are refused with that rule
at PreFilter. A quota change may let refused pods fit: they go back to the active queue.
"""

from __future__ import annotations

import logging
from typing import Any

from apis.crds.elasticquota import ElasticQuota
from apis.errors import TesseraError
from apis.extension import names
from apis.k8s.core import Pod
from kube import Client, EventRecorder, Informer, ObjectReference
from kube.quotas import QuotaManager
from scheduler.framework.interfaces import ClusterEvent, EventAction, EventResource
from scheduler.service.queue import SchedulingQueue

__all__ = ["REASON_INVALID_QUOTA", "QuotaFeed"]

log = logging.getLogger(__name__)

REASON_INVALID_QUOTA = "InvalidElasticQuota"
_QUOTA_CHANGED = ClusterEvent(EventResource.ELASTIC_QUOTA, EventAction.ALL)


class QuotaFeed:
    """Owns the ElasticQuota informer; adds quota accounting to the pod informer it is given."""

    def __init__(
        self,
        client: Client,
        *,
        manager: QuotaManager,
        pods: Informer[Pod],
        queue: SchedulingQueue,
        recorder: EventRecorder,
    ) -> None:
        self._manager = manager
        self._queue = queue
        self._recorder = recorder
        self.quotas: Informer[ElasticQuota] = Informer(client, names.ELASTIC_QUOTAS, parse=self._parse)
        self.quotas.add_handlers(self._quota_changed, lambda old, new: self._quota_changed(new), self._quota_deleted)
        pods.add_handlers(manager.update_pod, lambda old, new: manager.update_pod(new), manager.remove_pod)

    def start(self) -> None:
        self.quotas.start()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait for the first list, then say which of its quotas break a rule (once, not per
        quota listed: checking the tree costs a pass over every quota)."""
        if not self.quotas.wait_for_sync(timeout):
            return False
        problems = self._manager.problems()
        for quota in self.quotas.store.list():
            self._report(quota, problems.get(quota.meta.name, []))
        return True

    def stop(self) -> None:
        self.quotas.stop()

    def _parse(self, raw: dict[str, Any]) -> ElasticQuota:
        try:
            return ElasticQuota.from_dict(raw)
        except TesseraError as e:
            found = raw.get("metadata")
            meta: dict[str, Any] = found if isinstance(found, dict) else {}
            ref = _ref(str(meta.get("name", "")), str(meta.get("namespace", "")), str(meta.get("uid", "")))
            message = f"the scheduler cannot read this ElasticQuota; it keeps the last valid version: {e}"
            self._recorder.warning(ref, REASON_INVALID_QUOTA, message)
            raise

    def _quota_changed(self, quota: ElasticQuota) -> None:
        self._manager.set_quota(quota)
        if self.quotas.has_synced:
            self._report(quota, self._manager.problems().get(quota.meta.name, []))
        self._queue.move(_QUOTA_CHANGED)

    def _report(self, quota: ElasticQuota, problems: list[str]) -> None:
        if problems:
            ref = _ref(quota.meta.name, quota.meta.namespace, quota.meta.uid)
            self._recorder.warning(ref, REASON_INVALID_QUOTA, "; ".join(problems))

    def _quota_deleted(self, quota: ElasticQuota) -> None:
        self._manager.remove_quota(quota.meta.name)
        self._queue.move(_QUOTA_CHANGED)


def _ref(name: str, namespace: str, uid: str) -> ObjectReference:
    return ObjectReference(names.ELASTIC_QUOTAS.kind, name, namespace, uid, names.ELASTIC_QUOTAS.api_version)
