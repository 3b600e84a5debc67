"""The ElasticQuota admission rules: what Koordinator's `velasticquota.koordinator.sh` webhook refuses.

Pure: `review(request, quotas)` takes an AdmissionReview's `request` and the quotas the cluster
holds now (the informer's) and decides. The tree's rules are `apis.quota.rules`, the same the
scheduler reports for quotas stored before the webhook existed, so both say the same thing:

- CREATE / UPDATE: the object parses (quantities, min ≤ max, annotations); its name is not taken
  by a quota in another namespace (quota names are cluster-wide, as the `parent` label names a
  quota); then `validate_update` — max ≥ min, the parent exists and is a parent, no cycle, the
  children's mins fit in the parent's min, `is-parent` does not flip while there are children;
- DELETE: Koordinator's built-in quotas (root, system, default) and quotas with children cannot
  be deleted (Koordinator's `ValidDeleteQuota`).

A refusal is answered as controller-runtime's `admission.Denied` answers: code 403, reason
Forbidden, the message naming the rule and the quotas.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apis.crds.elasticquota import ElasticQuota
from apis.errors import TesseraError
from apis.quota import DEFAULT_QUOTA_NAME, ROOT_QUOTA_NAME, SYSTEM_QUOTA_NAME, QuotaSpec, validate_update

__all__ = ["BUILT_IN", "Decision", "review"]

BUILT_IN = frozenset({ROOT_QUOTA_NAME, SYSTEM_QUOTA_NAME, DEFAULT_QUOTA_NAME})


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    message: str = ""

    def response(self, uid: str) -> dict[str, Any]:
        """The AdmissionReview `response` for this decision."""
        if self.allowed:
            return {"uid": uid, "allowed": True}
        status = {"code": 403, "reason": "Forbidden", "message": self.message}
        return {"uid": uid, "allowed": False, "status": status}


ALLOW = Decision(True)


def _specs(quotas: Iterable[ElasticQuota]) -> tuple[dict[str, QuotaSpec], dict[str, ElasticQuota]]:
    """The stored quotas by name; one whose annotations do not parse has no spec (the controller
    reports it; it must not make every other quota unwritable)."""
    specs: dict[str, QuotaSpec] = {}
    by_name: dict[str, ElasticQuota] = {}
    for quota in quotas:
        by_name[quota.meta.name] = quota
        try:
            specs[quota.meta.name] = QuotaSpec.of(quota, counted=False)
        except TesseraError:
            continue
    return specs, by_name


def _spec(raw: object) -> QuotaSpec:
    """Raises TesseraError naming the field or annotation that does not parse."""
    return QuotaSpec.of(ElasticQuota.from_dict(raw), counted=False)  # Koordinator's rules on the names written


def review(request: Mapping[str, Any], quotas: Iterable[ElasticQuota]) -> Decision:
    """The decision on one AdmissionReview request about an ElasticQuota."""
    operation = request.get("operation")
    specs, by_name = _specs(quotas)
    if operation == "DELETE":
        return _delete(request, specs)
    if operation not in ("CREATE", "UPDATE"):
        return ALLOW
    try:
        new = _spec(request.get("object"))
    except TesseraError as e:
        return Decision(False, str(e))
    holder = by_name.get(new.name)
    if holder is not None and holder.meta.namespace != new.namespace:
        return Decision(
            False,
            f"quota {new.name}: a quota of this name already exists in namespace {holder.meta.namespace} "
            "(quota names are cluster-wide: the parent label names a quota)",
        )
    old = None
    if operation == "UPDATE":
        try:
            old = _spec(request.get("oldObject"))
        except TesseraError:
            old = None  # stored before the webhook: any valid new version may replace it
    problems = validate_update(old, new, specs)
    return Decision(False, "; ".join(problems)) if problems else ALLOW


def _delete(request: Mapping[str, Any], specs: Mapping[str, QuotaSpec]) -> Decision:
    meta = (request.get("oldObject") or {}).get("metadata") or {}
    name = str(meta.get("name") or request.get("name") or "")
    if name in BUILT_IN:
        return Decision(False, f"quota {name}: Koordinator's built-in quota cannot be deleted")
    children = sorted(n for n, s in specs.items() if s.parent == name and n != name)
    if children:
        return Decision(False, f"quota {name}: cannot be deleted while it has children ({', '.join(children)})")
    return ALLOW
