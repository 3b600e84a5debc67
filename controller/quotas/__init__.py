"""Elastic quota, the controller side: each ElasticQuota's `status.used` and Koordinator's runtime
annotations, a `Valid` condition, per-quota metrics, and reclaim (evicting a borrower's pods once
it has used more than its runtime for a grace period).

`status` (pure) says what a quota's status and annotations should be, `reclaim` (pure) which
pods go, `feed` keeps the shared `kube.quotas.QuotaManager` in step with the informers, and
`reconciler` reads caches and writes the difference. See docs/scheduling.md#elastic-quota.
"""

from controller.quotas.reconciler import NAME, QuotaReconciler, add_to_manager
from controller.quotas.settings import QuotaSettings

__all__ = ["NAME", "QuotaReconciler", "QuotaSettings", "add_to_manager"]
