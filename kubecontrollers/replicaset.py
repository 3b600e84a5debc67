"""The ReplicaSet controller's decisions: keep `spec.replicas` active pods, adopt, report status.

Upstream semantics for what is covered: pods are the ReplicaSet's when their controller
reference names it; a pod without a controller that matches the selector is adopted (its
ownerReference is added, and it counts); surplus pods go in kube's order (unscheduled before
scheduled, pending before running, unready before ready, newest first); finished pods
(Succeeded/Failed) and pods being deleted do not count, so an evicted or failed pod is replaced.
Status: replicas, fullyLabeledReplicas, readyReplicas, availableReplicas (ready for minReadySeconds),
observedGeneration.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from apis.k8s.workloads import is_pod_active, is_pod_ready, label_selector_matches
from kubecontrollers.kinds import PODS, REPLICA_SETS
from kubecontrollers.plan import (
    Delete,
    Obj,
    Plan,
    adopt,
    controlled_by,
    create_pod,
    has_controller,
    note,
    owner_reference,
    pod_from_template,
    random_suffix,
    status_patch,
)
from kubecontrollers.readiness import available

__all__ = ["sync_replicaset"]

#: Pods created or deleted per sync at most (kube's burstReplicas).
BURST = 500


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _labels(obj: Obj) -> dict[str, str]:
    return dict(_meta(obj).get("labels") or {})


def _deletion_rank(pod: Obj) -> tuple[int, int, int]:
    """Lower goes first: kube's ActivePods ordering for scale-down (then newest first, see `surplus`)."""
    status = pod.get("status") or {}
    scheduled = 1 if (pod.get("spec") or {}).get("nodeName") else 0
    running = {"Pending": 0, "Unknown": 1, "Running": 2}.get(str(status.get("phase")), 0)
    return (scheduled, running, 1 if is_pod_ready(pod) else 0)


def surplus(pods: Sequence[Obj], count: int) -> list[Obj]:
    """The `count` pods to delete first."""
    newest_first = sorted(pods, key=lambda p: str(_meta(p).get("creationTimestamp") or ""), reverse=True)
    return sorted(newest_first, key=_deletion_rank)[:count]


def owned_and_orphans(owner: Obj, pods: Sequence[Obj]) -> tuple[list[Obj], list[Obj]]:
    """(pods `owner` controls, pods without a controller that its selector matches)."""
    uid = _meta(owner)["uid"]
    selector = (owner.get("spec") or {}).get("selector")
    owned, orphans = [], []
    for pod in pods:
        if controlled_by(pod, uid):
            owned.append(pod)
        elif not has_controller(pod) and is_pod_active(pod) and label_selector_matches(selector, _labels(pod)):
            orphans.append(pod)
    return owned, orphans


def sync_replicaset(rs: Obj, pods: Sequence[Obj], *, now: float, rng: random.Random | None = None) -> Plan:
    """What `rs` needs, given the pods of its namespace. `now`: seconds since the epoch (minReadySeconds)."""
    plan = Plan()
    meta, spec = _meta(rs), rs.get("spec") or {}
    namespace = str(meta.get("namespace", ""))
    owned, orphans = owned_and_orphans(rs, pods)
    ref = owner_reference(rs, REPLICA_SETS)
    deleting = bool(meta.get("deletionTimestamp"))
    if not deleting:
        plan.actions += [adopt(p, PODS, ref) for p in orphans]
        owned += orphans
    active = [p for p in owned if is_pod_active(p)]
    wanted = int(spec.get("replicas", 1))
    if not deleting:
        if len(active) < wanted:
            template = spec.get("template") or {}
            for _ in range(min(wanted - len(active), BURST)):
                name = f"{meta['name']}-{random_suffix(rng)}"
                body = pod_from_template(template, namespace=namespace, name=name, owner=ref)
                plan.actions.append(
                    create_pod(body, note(rs, REPLICA_SETS, "SuccessfulCreate", f"Created pod: {name}"))
                )
        elif len(active) > wanted:
            for pod in surplus(active, min(len(active) - wanted, BURST)):
                pmeta = _meta(pod)
                told = note(rs, REPLICA_SETS, "SuccessfulDelete", f"Deleted pod: {pmeta['name']}")
                plan.actions.append(Delete(PODS, namespace, str(pmeta["name"]), str(pmeta["uid"]), note=told))
    min_ready = int(spec.get("minReadySeconds") or 0)
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    ready = [p for p in active if is_pod_ready(p)]
    avail = [p for p in ready if available(p, min_ready, now)]
    if len(avail) < len(ready):
        plan.later(1.0)  # a pod becomes available once ready for minReadySeconds
    status: dict[str, Any] = {
        "replicas": len(active),
        "fullyLabeledReplicas": sum(1 for p in active if template_labels.items() <= _labels(p).items()),
        "readyReplicas": len(ready),
        "availableReplicas": len(avail),
        "observedGeneration": meta.get("generation", 1),
    }
    write = status_patch(rs, REPLICA_SETS, status)
    if write is not None:
        plan.actions.append(write)
    return plan
