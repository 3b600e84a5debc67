"""The pod admission rules of Koordinator's `vpod.koordinator.sh` webhook that concern quotas.

Pure: `review(request, quotas)` decides one AdmissionReview `request` about a pod against the
ElasticQuotas stored now, in Koordinator's words (its `pkg/webhook/elasticquota/pod_check.go`):

- CREATE / UPDATE: a pod may not use a parent quota (`is-parent: "true"`) — the quota it uses is
  found as the scheduler finds it (`apis.quota.resolve_quota`: its quota label, else a quota
  named after its namespace, else one whose `namespaces` annotation lists it): `pod can not be
  linked to a parentQuotaGroup,quota:NAME, pod:POD`. Without this a pod naming a parent waits
  forever: the scheduler never admits it.
- UPDATE: the `quota.scheduling.koordinator.sh/preemptible` label may not change (`Preemptible
  label is forbidden modify now.`): quota reclaim decided with it.

A pod that does not parse is not this webhook's to judge (the API server validates pods).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from apis.crds.elasticquota import ElasticQuota
from apis.errors import TesseraError
from apis.extension import names
from apis.k8s.core import Pod
from apis.quota import resolve_quota
from controller.webhook.quota import ALLOW, Decision, quota_specs

__all__ = ["review"]


def review(
    request: Mapping[str, Any],
    quotas: Iterable[ElasticQuota],
    *,
    fresh: Callable[[], Iterable[ElasticQuota]] | None = None,
) -> Decision:
    """The decision on one AdmissionReview request about a pod. `quotas` may be a cache a moment
    behind; `fresh()`, the quotas stored now, is read when the pod's quota label names a quota
    the cache does not have (one made a moment ago)."""
    operation = request.get("operation")
    if operation not in ("CREATE", "UPDATE"):
        return ALLOW
    try:
        pod = Pod.from_dict(request.get("object"))
    except TesseraError:
        return ALLOW
    if operation == "UPDATE":
        old = (request.get("oldObject") or {}).get("metadata") or {}
        if (old.get("labels") or {}).get(names.LABEL_QUOTA_PREEMPTIBLE) != pod.labels.get(
            names.LABEL_QUOTA_PREEMPTIBLE
        ):
            return Decision(False, "Preemptible label is forbidden modify now.")
    specs, _ = quota_specs(quotas)
    named = pod.labels.get(names.LABEL_QUOTA_NAME)
    if named and named not in specs and fresh is not None:
        specs, _ = quota_specs(fresh())
    name = resolve_quota(pod, specs)
    spec = specs.get(name)
    if spec is not None and spec.is_parent:
        return Decision(False, f"pod can not be linked to a parentQuotaGroup,quota:{name}, pod:{pod.name}")
    return ALLOW
