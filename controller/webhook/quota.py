"""The ElasticQuota admission rules: what Koordinator's `velasticquota.koordinator.sh` webhook refuses.

Pure: `review(request, quotas)` takes an AdmissionReview's `request` and the quotas the cluster
holds now (the informer's) and decides. The tree's rules are `apis.quota.rules`, the same the
scheduler reports for quotas stored before the webhook existed, so both say the same thing:

- CREATE / UPDATE: the object parses (quantities, min ≤ max, annotations); its name is not taken
  by a quota in another namespace (quota names are cluster-wide, as the `parent` label names a
  quota); then Koordinator's own checks, in its order and words (`koordinator_problem`: the first
  one broken is the answer, as Koordinator's webhook answers) — min's keys are in max; max is
  not negative; `is-parent` does not become false while the quota has children, nor true while
  pods use it; the parent exists and is a parent; a child's max and min keys are all the
  parent's (Koordinator's rule with its `ElasticQuotaEnableUpdateResourceKey` gate: a child may
  leave a resource out, never add one); the siblings' and the children's mins fit the min —
  and `validate_update`'s rules (which also name the amounts, and add some Koordinator lacks: no
  cycle, ...), after Koordinator's words in parentheses;
- DELETE: Koordinator's built-in quotas (root, system, default) and quotas with children cannot
  be deleted (Koordinator's `ValidDeleteQuota`).

A refusal is answered as controller-runtime's `admission.Denied` answers: code 403, reason
Forbidden, the message naming the rule and the quotas.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apis.crds.elasticquota import ElasticQuota
from apis.errors import TesseraError
from apis.k8s import resources
from apis.quota import DEFAULT_QUOTA_NAME, ROOT_QUOTA_NAME, SYSTEM_QUOTA_NAME, QuotaSpec, validate_update

__all__ = ["ALLOW", "BUILT_IN", "Decision", "koordinator_problem", "quota_specs", "review"]

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


def quota_specs(quotas: Iterable[ElasticQuota]) -> tuple[dict[str, QuotaSpec], dict[str, ElasticQuota]]:
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


def review(
    request: Mapping[str, Any],
    quotas: Iterable[ElasticQuota],
    *,
    has_pods: Callable[[QuotaSpec], bool] = lambda _: False,
) -> Decision:
    """The decision on one AdmissionReview request about an ElasticQuota. `has_pods(quota)`:
    whether pods use the quota (asked only when an update makes it a parent)."""
    operation = request.get("operation")
    specs, by_name = quota_specs(quotas)
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
    first = koordinator_problem(old, new, specs, has_pods=has_pods)
    problems = validate_update(old, new, specs)
    if first:  # Koordinator's words first; ours, which name the amounts, after them
        return Decision(False, f"{first} ({'; '.join(problems)})" if problems else first)
    return Decision(False, "; ".join(problems)) if problems else ALLOW


def koordinator_problem(
    old: QuotaSpec | None, new: QuotaSpec, specs: Mapping[str, QuotaSpec], *, has_pods: Callable[[QuotaSpec], bool]
) -> str:
    """The first of Koordinator's checks (`pkg/webhook/elasticquota`) that `new` breaks, in
    Koordinator's words; "" when none does."""
    name = new.name
    negative = sorted(r for r, v in new.max.items() if v < 0)
    if negative:
        return f"{name} quota.Spec.Max's value < 0, in dimensions :[{' '.join(negative)}]"
    for key in sorted(new.min):
        if key not in new.max:
            return f"resourceKey {key} of quota {name} is included in min, which is not included in max"
    if name == ROOT_QUOTA_NAME:
        return ""
    others = {n: s for n, s in specs.items() if n != name}
    children = sorted(n for n, s in others.items() if s.parent == name)
    if old is not None and old.is_parent != new.is_parent:
        if children and not new.is_parent:
            return f"quota has children, isParent is forbidden to modify as false, quotaName:{name}"
        if new.is_parent and has_pods(old):
            return f"quota has bound pods, isParent is forbidden to modify as true, quotaName: {name}"
    if new.parent == ROOT_QUOTA_NAME and not new.is_parent:
        return ""
    parent = others.get(new.parent)
    if new.parent != ROOT_QUOTA_NAME:
        if parent is None:
            return f"{name} has parentName {new.parent} but not find parentInfo in quotaInfoMap"
        if not parent.is_parent:
            return f"{name} has parentName {new.parent} but the parentQuotaInfo's IsParent is false"
        keys = _keys_problem(parent, new)
        if keys:
            return keys
    for child in children:
        keys = _keys_problem(new, others[child])
        if keys:
            return keys
    if parent is not None:
        siblings = resources.sum_of([new.min, *(s.min for s in others.values() if s.parent == parent.name)])
        if not _within(siblings, parent.min):
            return f"checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: {parent.name}"
    if children and not _within(resources.sum_of(others[c].min for c in children), new.min):
        return f"checkMinQuotaSum all children's MinQuota > current MinQuota, current: {name}"
    return ""


def _keys_problem(parent: QuotaSpec, child: QuotaSpec) -> str:
    """Koordinator's checkSubAndParentGroupQuotaKey (resource keys may be left out, not added)."""
    prefix = "failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey failed:"
    if not set(child.max) <= set(parent.max):
        return f"{prefix} {child.name}'s max keys are not all included in {parent.name}'s"
    if not set(child.min) <= set(parent.min):
        return f"{prefix} {child.name}'s min keys are not all included in {parent.name}'s"
    return ""


def _within(amounts: Mapping[str, int], limit: Mapping[str, int]) -> bool:
    return all(v <= limit.get(r, 0) for r, v in amounts.items())


def _delete(request: Mapping[str, Any], specs: Mapping[str, QuotaSpec]) -> Decision:
    meta = (request.get("oldObject") or {}).get("metadata") or {}
    name = str(meta.get("name") or request.get("name") or "")
    if name in BUILT_IN:
        return Decision(False, f"quota {name}: Koordinator's built-in quota cannot be deleted")
    children = sorted(n for n, s in specs.items() if s.parent == name and n != name)
    if children:
        return Decision(False, f"quota {name}: cannot be deleted while it has children ({', '.join(children)})")
    return ALLOW
