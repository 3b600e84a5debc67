"""The StatefulSet controller's decisions: pods NAME-0 … NAME-(replicas-1), in order.

As upstream, for what is covered: each pod has a stable name and the labels
`statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index` and
`controller-revision-hash` (a hash of the template). With `OrderedReady`, a pod is created only
when every lower ordinal is Running and Ready, and scale-down removes the highest ordinal first,
one at a time; `Parallel` creates and removes at once. A failed pod is deleted and re-created
under its name. RollingUpdate replaces pods of an older revision from the highest ordinal down,
one at a time, each once the others are ready, and not below `partition`. Not covered:
volumeClaimTemplates (no volumes here), ControllerRevision objects (the revision is the hash), OnDelete.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from apis.k8s.workloads import is_pod_active, is_pod_ready
from kubecontrollers.kinds import PODS, STATEFUL_SETS
from kubecontrollers.plan import (
    Delete,
    Obj,
    Plan,
    controlled_by,
    create_pod,
    note,
    owner_reference,
    pod_from_template,
    safe_hash,
    status_patch,
)

__all__ = ["REVISION_LABEL", "sync_statefulset"]

REVISION_LABEL = "controller-revision-hash"
_POD_NAME = "statefulset.kubernetes.io/pod-name"
_POD_INDEX = "apps.kubernetes.io/pod-index"


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _ordinal(set_name: str, pod: Obj) -> int | None:
    m = re.fullmatch(re.escape(set_name) + r"-(\d+)", str(_meta(pod).get("name", "")))
    return int(m.group(1)) if m else None


def _delete(pod: Obj, sts: Obj) -> Delete:
    meta = _meta(pod)
    told = note(
        sts,
        STATEFUL_SETS,
        "SuccessfulDelete",
        f"delete Pod {meta['name']} in StatefulSet {_meta(sts)['name']} successful",
    )
    return Delete(PODS, str(meta.get("namespace", "")), str(meta["name"]), str(meta["uid"]), note=told)


def sync_statefulset(sts: Obj, pods: Sequence[Obj]) -> Plan:
    """What `sts` needs, given the pods of its namespace."""
    plan = Plan()
    meta, spec = _meta(sts), sts.get("spec") or {}
    name, namespace = str(meta["name"]), str(meta.get("namespace", ""))
    if meta.get("deletionTimestamp"):
        return plan
    template = spec.get("template") or {}
    revision = f"{name}-{safe_hash(template)}"
    replicas = int(spec.get("replicas", 1))
    ordered = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
    by_ordinal: dict[int, Obj] = {}
    pod: Obj | None
    for pod in pods:
        ordinal = _ordinal(name, pod)
        if ordinal is not None and controlled_by(pod, meta["uid"]):
            by_ordinal[ordinal] = pod
    ref = owner_reference(sts, STATEFUL_SETS)
    blocked = False  # OrderedReady: a lower ordinal is not Running and Ready yet
    for ordinal in range(replicas):
        pod = by_ordinal.get(ordinal)
        if pod is not None and (pod.get("status") or {}).get("phase") == "Failed":
            plan.actions.append(_delete(pod, sts))
            blocked = blocked or ordered
            continue
        if pod is None:
            if blocked:
                break
            labels = {_POD_NAME: f"{name}-{ordinal}", _POD_INDEX: str(ordinal), REVISION_LABEL: revision}
            body = pod_from_template(template, namespace=namespace, name=f"{name}-{ordinal}", owner=ref, labels=labels)
            body["spec"].setdefault("hostname", f"{name}-{ordinal}")
            if spec.get("serviceName"):
                body["spec"].setdefault("subdomain", spec["serviceName"])
            told = f"create Pod {name}-{ordinal} in StatefulSet {name} successful"
            plan.actions.append(create_pod(body, note(sts, STATEFUL_SETS, "SuccessfulCreate", told)))
            blocked = blocked or ordered
        elif ordered and not (is_pod_active(pod) and is_pod_ready(pod)):
            blocked = True
    surplus = sorted((o for o in by_ordinal if o >= replicas), reverse=True)
    if surplus and not (ordered and blocked):
        for ordinal in surplus[:1] if ordered else surplus:
            if is_pod_active(by_ordinal[ordinal]):
                plan.actions.append(_delete(by_ordinal[ordinal], sts))
    current = [by_ordinal[o] for o in sorted(by_ordinal) if o < replicas]
    all_ready = len(current) == replicas and all(is_pod_ready(p) for p in current)
    strategy = spec.get("updateStrategy") or {}
    partition = int((strategy.get("rollingUpdate") or {}).get("partition", 0))
    if strategy.get("type", "RollingUpdate") == "RollingUpdate" and all_ready and not plan.actions:
        outdated = [
            o
            for o in sorted(by_ordinal, reverse=True)
            if partition <= o < replicas and (_meta(by_ordinal[o]).get("labels") or {}).get(REVISION_LABEL) != revision
        ]
        if outdated:
            plan.actions.append(_delete(by_ordinal[outdated[0]], sts))
    updated = sum(1 for p in current if (_meta(p).get("labels") or {}).get(REVISION_LABEL) == revision)
    old = sts.get("status") or {}
    done = updated == replicas and all_ready
    status: dict[str, Any] = {
        "observedGeneration": meta.get("generation", 1),
        "replicas": sum(1 for p in by_ordinal.values() if is_pod_active(p)),
        "readyReplicas": sum(1 for p in by_ordinal.values() if is_pod_ready(p)),
        "availableReplicas": sum(1 for p in by_ordinal.values() if is_pod_ready(p)),
        "currentReplicas": updated if done else max(0, len(current) - updated),
        "updatedReplicas": updated,
        "currentRevision": revision if done or not old.get("currentRevision") else old["currentRevision"],
        "updateRevision": revision,
        "collisionCount": 0,
    }
    write = status_patch(sts, STATEFUL_SETS, status)
    if write is not None:
        plan.actions.append(write)
    return plan
