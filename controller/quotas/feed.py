"""The controller's QuotaManager, fed by its informers: quotas, every pod, and the nodes' total.

The same accounting as the scheduler's (`kube.quotas.QuotaManager`): every non-terminal pod counts
in its quota's request, a bound one in its used too; the root's total is the nodes' allocatable
in quota names. A quota that does not parse keeps its last valid version, as in the scheduler,
so both compute the same runtimes. Handlers are added to the informers before the controller's
own, so a key is queued only once the manager has seen the change that queued it.
"""

from __future__ import annotations

from apis.crds.elasticquota import ElasticQuota
from apis.extension import names
from apis.k8s.core import Node, Pod
from apis.quota import capacity_of
from controller.quotas.status import STATUS_ANNOTATIONS
from controller.runtime import Malformed
from kube.informer import Informer
from kube.quotas import QuotaManager

__all__ = ["feed", "spec_changed"]


def feed(
    manager: QuotaManager,
    quotas: Informer[ElasticQuota | Malformed],
    pods: Informer[Pod],
    nodes: Informer[Node],
) -> None:
    """Keep `manager` in step with the three informers (call before they start)."""

    def quota_added(quota: ElasticQuota | Malformed) -> None:
        if isinstance(quota, ElasticQuota):
            manager.set_quota(quota)

    def quota_updated(old: ElasticQuota | Malformed, new: ElasticQuota | Malformed) -> None:
        if isinstance(new, ElasticQuota) and (not isinstance(old, ElasticQuota) or spec_changed(old, new)):
            manager.set_quota(new)

    def quota_deleted(quota: ElasticQuota | Malformed) -> None:
        manager.remove_quota(quota.meta.name if isinstance(quota, ElasticQuota) else quota.name)

    def total(_node: Node) -> None:
        manager.set_capacity(capacity_of(n.allocatable for n in nodes.store.list()))

    def node_updated(old: Node, new: Node) -> None:
        if old is new or old.allocatable != new.allocatable:
            total(new)

    quotas.add_handlers(quota_added, quota_updated, quota_deleted)
    pods.add_handlers(manager.update_pod, lambda _old, new: manager.update_pod(new), manager.remove_pod)
    nodes.add_handlers(total, node_updated, total)


#: Annotations that say nothing about the tree: the controller's own writes, and an operator's
#: word to resume reclaim.
_NOT_THE_TREE = frozenset({*STATUS_ANNOTATIONS, names.ANNOTATION_QUOTA_RESUME_RECLAIM})


def spec_changed(old: ElasticQuota, new: ElasticQuota) -> bool:
    """Whether the change matters to the tree: min, max, labels, or an annotation other than the
    ones this controller writes (its own writes do not rebuild the tree) and the resume word."""

    def own(quota: ElasticQuota) -> dict[str, str]:
        return {k: v for k, v in quota.meta.annotations.items() if k not in _NOT_THE_TREE}

    return (old.min, old.max, old.meta.labels, own(old)) != (new.min, new.max, new.meta.labels, own(new))
