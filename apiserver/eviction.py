"""The Eviction subresource's PodDisruptionBudget check, as kube-apiserver makes it.

An eviction is a delete that a budget may refuse. A pod that is not running yet or has finished
(Pending, Succeeded, Failed), or is already being deleted, is deleted without a look at budgets. Otherwise
the budgets of its namespace whose selector matches it decide: more than one is a 500 (the
subresource does not support it), and one that would fall below its desired healthy pods refuses
with 429 TooManyRequests — "Cannot evict pod as it would violate the pod's disruption budget." —
which `kubectl drain` retries. An unready pod may go as long as the budget is met without it
(the default `IfHealthyBudget` policy).

The numbers are computed here, now, from the pods the server holds (`apis.k8s.workloads`), not
read from the budget's status, which the disruption controller may not have caught up on: the
check and the delete happen in one step of the event loop, so two evictions never both spend the
last allowed disruption.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from apis.errors import ValidationError
from apis.k8s.workloads import Scale, controller_of, disruption_budget, is_pod_ready, label_selector_matches
from apiserver.catalog import Catalog, ResourceType
from apiserver.errors import Cause, StatusError
from apiserver.registry import Registry
from apiserver.selectors import ObjectFilter, parse_field_selector, parse_label_selector

__all__ = ["check_budgets"]

_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
#: Owner kind -> (group, version, plural) of the types whose replicas count as expected pods.
_SCALABLE = {
    "ReplicaSet": ("apps", "v1", "replicasets"),
    "Deployment": ("apps", "v1", "deployments"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
}


def _lookup(catalog: Catalog, group: str, version: str, plural: str) -> ResourceType:
    rt = catalog.lookup(group, version, plural)
    assert rt is not None, plural
    return rt


def _in_namespace(registry: Registry, rt: ResourceType, namespace: str) -> list[Mapping[str, Any]]:
    flt = ObjectFilter(namespace, parse_label_selector(""), parse_field_selector("", rt))
    return [e.obj for e in registry.snapshot(rt, flt)]


def _scale_finder(registry: Registry, catalog: Catalog, namespace: str) -> Callable[[Mapping[str, Any]], Scale | None]:
    """`scale_of(controllerRef)` for `disruption_budget`: a ReplicaSet of a Deployment answers for it."""

    def scale_of(ref: Mapping[str, Any]) -> Scale | None:
        where = _SCALABLE.get(str(ref.get("kind")))
        if where is None:
            return None
        try:
            owner = registry.get(_lookup(catalog, *where), namespace, str(ref.get("name")))
        except StatusError:
            return None
        if owner.obj["metadata"]["uid"] != ref.get("uid"):
            return None
        parent = controller_of(owner.obj)
        if ref.get("kind") == "ReplicaSet" and parent is not None and parent.get("kind") == "Deployment":
            return scale_of(parent) or (str(ref.get("uid")), int((owner.obj.get("spec") or {}).get("replicas", 0)))
        return str(ref.get("uid")), int((owner.obj.get("spec") or {}).get("replicas", 0))

    return scale_of


def check_budgets(registry: Registry, catalog: Catalog, pod: Mapping[str, Any]) -> None:
    """Raise StatusError (429, or 500 for several budgets) when evicting `pod` now would break a budget."""
    meta, status = pod["metadata"], pod.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") in ("Pending", "Succeeded", "Failed"):
        return
    namespace = meta.get("namespace", "")
    labels = meta.get("labels") or {}
    pdbs = _lookup(catalog, "policy", "v1", "poddisruptionbudgets")
    matching = [
        b
        for b in _in_namespace(registry, pdbs, namespace)
        if label_selector_matches((b.get("spec") or {}).get("selector"), labels)
    ]
    if not matching:
        return
    if len(matching) > 1:
        raise StatusError.internal(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        )
    pdb = matching[0]
    selector = (pdb.get("spec") or {}).get("selector")
    pods = [
        p
        for p in _in_namespace(registry, _lookup(catalog, "", "v1", "pods"), namespace)
        if label_selector_matches(selector, (p["metadata"].get("labels") or {}))
    ]
    try:
        budget = disruption_budget(pdb, pods, _scale_finder(registry, catalog, namespace))
    except ValidationError as e:  # validated on create; a budget stored before that rule existed
        raise StatusError.internal(f"the disruption budget {pdb['metadata']['name']} is invalid: {e}") from None
    # A ready pod spends a disruption; an unready one may go while the budget holds without it.
    ready = is_pod_ready(pod)
    allowed = budget.disruptions_allowed > 0 if ready else budget.current_healthy >= budget.desired_healthy
    if not allowed:
        name = pdb["metadata"]["name"]
        why = (
            f"The disruption budget {name} needs {budget.desired_healthy} healthy pods "
            f"and has {budget.current_healthy} currently"
        )
        raise StatusError(429, "TooManyRequests", _VIOLATION, causes=[Cause("", why, "DisruptionBudget")])
