"""The Deployment controller's decisions: a ReplicaSet per pod template, rolled as the strategy says.

As upstream, for what is covered: the ReplicaSet of the current template (compared without the
`pod-template-hash` label) is the new one; it is created as `NAME-HASH` with the hash in its
labels, selector and template and `deployment.kubernetes.io/revision` one above the newest old
one. RollingUpdate scales the new one up as far as `replicas + maxSurge` allows and the old ones
down as far as `replicas - maxUnavailable` available pods allow (unavailable old pods first);
Recreate scales every old one to 0 and waits until their pods are gone before scaling the new
one up. ReplicaSets without a controller that match the selector are adopted; old ones with no
replicas beyond `revisionHistoryLimit` are deleted. Status carries what `kubectl rollout status`
reads: observedGeneration, replicas, updatedReplicas, readyReplicas, availableReplicas and the
Available / Progressing conditions. Not covered: paused deployments, rollback, the progress deadline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apis.k8s.workloads import is_pod_active, label_selector_matches, scaled_value
from kubecontrollers.kinds import DEPLOYMENTS, REPLICA_SETS
from kubecontrollers.plan import (
    Create,
    Delete,
    Obj,
    Patch,
    Plan,
    adopt,
    controlled_by,
    has_controller,
    note,
    owner_reference,
    safe_hash,
    status_patch,
    with_condition,
)

__all__ = ["HASH_LABEL", "REVISION", "sync_deployment", "template_hash"]

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
_DESIRED = "deployment.kubernetes.io/desired-replicas"
_MAX = "deployment.kubernetes.io/max-replicas"


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _replicas(rs: Obj) -> int:
    return int(_spec(rs).get("replicas", 0))


def _status(rs: Obj, field: str) -> int:
    return int((rs.get("status") or {}).get(field, 0))


def _available(rs: Obj) -> int:
    """Available pods an RS will keep: a status not yet caught up with a scale-down counts no more
    than the new spec (never spend availability twice)."""
    return min(_replicas(rs), _status(rs, "availableReplicas"))


def _revision(rs: Obj) -> int:
    text = (_meta(rs).get("annotations") or {}).get(REVISION, "0")
    return int(text) if str(text).isdigit() else 0


def template_hash(template: Obj, collisions: int = 0) -> str:
    return safe_hash([template, collisions])


def _without_hash(template: Obj) -> Obj:
    meta = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != HASH_LABEL}
    meta["labels"] = labels
    return {**template, "metadata": meta}


def _new_replicaset(d: Obj, revision: int, replicas: int) -> dict[str, Any]:
    meta, spec = _meta(d), _spec(d)
    template = spec.get("template") or {}
    digest = template_hash(template, int((d.get("status") or {}).get("collisionCount", 0)))
    tmeta = dict(template.get("metadata") or {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), HASH_LABEL: digest}
    selector = dict(spec.get("selector") or {})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: digest}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{digest}",
            "namespace": meta.get("namespace", ""),
            "labels": {**(tmeta["labels"])},
            "annotations": {REVISION: str(revision), **_size_annotations(d)},
            "ownerReferences": [owner_reference(d, DEPLOYMENTS)],
        },
        "spec": {
            "replicas": replicas,
            "minReadySeconds": int(spec.get("minReadySeconds") or 0),
            "selector": selector,
            "template": {**template, "metadata": tmeta},
        },
    }


def _size_annotations(d: Obj) -> dict[str, str]:
    spec = _spec(d)
    replicas = int(spec.get("replicas", 1))
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    surge = scaled_value(rolling.get("maxSurge", 0), replicas, round_up=True) if rolling else 0
    return {_DESIRED: str(replicas), _MAX: str(replicas + surge)}


def _scale(rs: Obj, replicas: int, d: Obj) -> Patch:
    meta = _meta(rs)
    body = {"metadata": {"annotations": _size_annotations(d)}, "spec": {"replicas": replicas}}
    way = "up" if replicas > _replicas(rs) else "down"
    told = note(
        d,
        DEPLOYMENTS,
        "ScalingReplicaSet",
        f"Scaled {way} replica set {meta['name']} from {_replicas(rs)} to {replicas}",
    )
    return Patch(REPLICA_SETS, str(meta.get("namespace", "")), str(meta["name"]), body, note=told)


def _limits(d: Obj) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as counts; both 0 would stall, so unavailable is then 1 (kube's rule)."""
    spec = _spec(d)
    replicas = int(spec.get("replicas", 1))
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    surge = scaled_value(rolling.get("maxSurge", 0), replicas, round_up=True)
    unavailable = scaled_value(rolling.get("maxUnavailable", 0), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, min(unavailable, replicas)


def _rolling(d: Obj, new: Obj, olds: list[Obj], plan: Plan) -> dict[str, int]:
    """New targets (name -> replicas) for one step of a rolling update."""
    wanted = int(_spec(d).get("replicas", 1))
    surge, max_unavailable = _limits(d)
    targets = {str(_meta(rs)["name"]): _replicas(rs) for rs in [new, *olds]}
    new_name = str(_meta(new)["name"])
    # Pods an RS still has count until its controller has removed them (its status says so): a
    # scale-down not carried out yet must not make room for a surge, or the pods would exceed
    # replicas + maxSurge for a moment (kube counts spec only; this is stricter on purpose).
    total = sum(max(_replicas(rs), _status(rs, "replicas")) for rs in [new, *olds])
    if targets[new_name] > wanted:
        targets[new_name] = wanted
    elif total < wanted + surge and targets[new_name] < wanted:
        targets[new_name] += min(wanted + surge - total, wanted - targets[new_name])
    min_available = wanted - max_unavailable
    new_unavailable = _replicas(new) - _available(new)
    oldest_first = sorted(olds, key=lambda rs: str(_meta(rs).get("creationTimestamp") or ""))
    # Old pods that are not available go first: removing them costs no availability.
    cleanup = sum(targets.values()) - min_available - new_unavailable
    for rs in oldest_first:
        name = str(_meta(rs)["name"])
        unhealthy = max(0, targets[name] - _status(rs, "availableReplicas"))
        step = min(unhealthy, max(0, cleanup))
        targets[name] -= step
        cleanup -= step
    can_go = sum(_available(rs) for rs in [new, *olds]) - min_available
    for rs in oldest_first:
        name = str(_meta(rs)["name"])
        step = min(targets[name], max(0, can_go))
        targets[name] -= step
        can_go -= step
    if any(targets[str(_meta(rs)["name"])] for rs in olds) or targets[new_name] != wanted:
        plan.later(5.0)
    return targets


def _recreate(d: Obj, new: Obj, olds: list[Obj], pods: Sequence[Obj]) -> dict[str, int]:
    targets = {str(_meta(rs)["name"]): 0 for rs in olds}
    old_uids = {_meta(rs)["uid"] for rs in olds}
    old_pods_running = any(is_pod_active(p) and any(controlled_by(p, uid) for uid in old_uids) for p in pods)
    wanted = int(_spec(d).get("replicas", 1))
    targets[str(_meta(new)["name"])] = _replicas(new) if old_pods_running else wanted
    return targets


def _status_of(d: Obj, new: Obj | None, all_rs: list[Obj]) -> dict[str, Any]:
    wanted = int(_spec(d).get("replicas", 1))
    _, max_unavailable = _limits(d) if (_spec(d).get("strategy") or {}).get("type") != "Recreate" else (0, 0)
    available = sum(_status(rs, "availableReplicas") for rs in all_rs)
    updated = _status(new, "replicas") if new is not None else 0
    total = sum(_status(rs, "replicas") for rs in all_rs)
    status: dict[str, Any] = {
        "observedGeneration": _meta(d).get("generation", 1),
        "replicas": total,
        "updatedReplicas": updated,
        "readyReplicas": sum(_status(rs, "readyReplicas") for rs in all_rs),
        "availableReplicas": available,
    }
    if wanted - available > 0:
        status["unavailableReplicas"] = wanted - available
    old = d.get("status") or {}
    if old.get("collisionCount"):
        status["collisionCount"] = old["collisionCount"]
    conditions = old.get("conditions") or ()
    if available >= wanted - max_unavailable:
        conditions = with_condition(
            conditions, "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."
        )
    else:
        conditions = with_condition(
            conditions,
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    name = _meta(new)["name"] if new is not None else ""
    if new is not None and updated == wanted and total == updated and available >= wanted:
        reason, message = "NewReplicaSetAvailable", f'ReplicaSet "{name}" has successfully progressed.'
    else:
        reason, message = "ReplicaSetUpdated", f'ReplicaSet "{name}" is progressing.'
    status["conditions"] = with_condition(conditions, "Progressing", "True", reason, message)
    for c in status["conditions"]:
        c.setdefault("lastUpdateTime", c["lastTransitionTime"])
    return status


def sync_deployment(d: Obj, replicasets: Sequence[Obj], pods: Sequence[Obj]) -> Plan:
    """What `d` needs, given the ReplicaSets and pods of its namespace."""
    plan = Plan()
    meta, spec = _meta(d), _spec(d)
    namespace = str(meta.get("namespace", ""))
    uid = meta["uid"]
    selector = spec.get("selector")
    owned = [rs for rs in replicasets if controlled_by(rs, uid)]
    if meta.get("deletionTimestamp"):
        return plan
    ref = owner_reference(d, DEPLOYMENTS)
    for rs in replicasets:
        rmeta = _meta(rs)
        if has_controller(rs) or rmeta.get("deletionTimestamp"):
            continue
        if label_selector_matches(selector, rmeta.get("labels") or {}):
            plan.actions.append(adopt(rs, REPLICA_SETS, ref))
    template = _without_hash(spec.get("template") or {})
    new = next((rs for rs in owned if _without_hash(_spec(rs).get("template") or {}) == template), None)
    olds = [rs for rs in owned if rs is not new]
    max_old = max((_revision(rs) for rs in olds), default=0)
    if new is None:
        recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
        busy = sum(_replicas(rs) for rs in olds)
        first = 0 if recreate and busy else int(spec.get("replicas", 1))
        if not recreate and olds:
            surge, _ = _limits(d)
            first = max(0, min(first, int(spec.get("replicas", 1)) + surge - busy))
        created = _new_replicaset(d, max_old + 1, first)
        told = f"Scaled up replica set {created['metadata']['name']} from 0 to {first}"
        plan.actions.append(Create(REPLICA_SETS, namespace, created, note(d, DEPLOYMENTS, "ScalingReplicaSet", told)))
        plan.actions.append(_revision_patch(d, max_old + 1))
        plan.later(1.0)
        return plan  # the next sync sees it in the cache and goes on from there
    if _revision(new) <= max_old:  # a rollback to an older template: it becomes the newest revision
        body = {"metadata": {"annotations": {REVISION: str(max_old + 1)}}}
        plan.actions.append(Patch(REPLICA_SETS, namespace, str(_meta(new)["name"]), body))
    if (meta.get("annotations") or {}).get(REVISION) != str(max(max_old + 1, _revision(new))):
        plan.actions.append(_revision_patch(d, max(max_old + 1, _revision(new))))
    if (spec.get("strategy") or {}).get("type") == "Recreate":
        targets = _recreate(d, new, olds, pods)
    else:
        targets = _rolling(d, new, olds, plan)
    for rs in [new, *olds]:
        if targets[str(_meta(rs)["name"])] != _replicas(rs):
            plan.actions.append(_scale(rs, targets[str(_meta(rs)["name"])], d))
    plan.actions += _history_cleanup(d, olds, targets)
    write = status_patch(d, DEPLOYMENTS, _status_of(d, new, [new, *olds]))
    if write is not None:
        plan.actions.append(write)
    return plan


def _revision_patch(d: Obj, revision: int) -> Patch:
    meta = _meta(d)
    body = {"metadata": {"annotations": {REVISION: str(revision)}}}
    return Patch(DEPLOYMENTS, str(meta.get("namespace", "")), str(meta["name"]), body)


def _history_cleanup(d: Obj, olds: list[Obj], targets: dict[str, int]) -> list[Delete]:
    """Old ReplicaSets with no replicas left beyond revisionHistoryLimit, oldest revision first."""
    limit = int(_spec(d).get("revisionHistoryLimit", 10))
    idle = [
        rs
        for rs in olds
        if targets[str(_meta(rs)["name"])] == 0 and _replicas(rs) == 0 and _status(rs, "replicas") == 0
    ]
    extra = len(idle) - limit
    if extra <= 0:
        return []
    return [
        Delete(REPLICA_SETS, str(_meta(rs).get("namespace", "")), str(_meta(rs)["name"]), str(_meta(rs)["uid"]))
        for rs in sorted(idle, key=_revision)[:extra]
    ]
