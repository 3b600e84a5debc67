"""The disruption controller's decisions: a PodDisruptionBudget's status, for `kubectl get pdb`.

The numbers come from `apis.k8s.workloads.disruption_budget`, the same function the API server's
Eviction subresource runs when it decides (so what the status says is what an eviction gets).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from apis.errors import ValidationError
from apis.k8s.workloads import Scale, disruption_budget, label_selector_matches
from kubecontrollers.kinds import POD_DISRUPTION_BUDGETS
from kubecontrollers.plan import Obj, Plan, status_patch, with_condition

__all__ = ["sync_budget"]


def sync_budget(pdb: Obj, pods: Sequence[Obj], scale_of: Callable[[Obj], Scale | None]) -> Plan:
    """The status of `pdb` given the pods of its namespace (`scale_of`: an owner's replicas)."""
    plan = Plan()
    meta, spec = pdb.get("metadata") or {}, pdb.get("spec") or {}
    selector = spec.get("selector")
    matched = [p for p in pods if label_selector_matches(selector, (p.get("metadata") or {}).get("labels") or {})]
    old = pdb.get("status") or {}
    try:
        budget = disruption_budget(pdb, matched, scale_of)
    except ValidationError:
        return plan  # the server validates budgets; one it kept from before is left alone
    allowed = budget.disruptions_allowed
    status: dict[str, Any] = {
        "observedGeneration": meta.get("generation", 1),
        "disruptionsAllowed": allowed,
        "currentHealthy": budget.current_healthy,
        "desiredHealthy": budget.desired_healthy,
        "expectedPods": budget.expected_pods,
        "conditions": with_condition(
            old.get("conditions") or (),
            "DisruptionAllowed",
            "True" if allowed > 0 else "False",
            "SufficientPods" if allowed > 0 else "InsufficientPods",
            "",
        ),
    }
    for c in status["conditions"]:
        c.setdefault("observedGeneration", meta.get("generation", 1))
    write = status_patch(pdb, POD_DISRUPTION_BUDGETS, status)
    if write is not None:
        plan.actions.append(write)
    return plan
