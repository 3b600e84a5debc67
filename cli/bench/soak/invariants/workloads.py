"""Workloads: a Deployment never runs more pods than replicas + maxSurge, gets its ready replicas,
and every Job completes.

A rolling update may create up to `replicas + maxSurge` pods (Kubernetes counts the active ones:
not finished, not being deleted) across the Deployment's ReplicaSets. A controller manager killed
between creating a pod and recording it may briefly count wrong, so the surge bound holds after
`Bounds.workload_settle_s` of calm (the grace `Persistence` measures from the last disturbance).
Ready replicas and Job completion are liveness: within `Bounds.pending_s` (plus a Job's run time,
`Bounds.job_run_s`) of the later of the object's first sighting short and the last disturbance.
Objects being deleted are not judged; pods belong to a Deployment through their controller
ownerReference to one of its ReplicaSets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from apis.errors import ValidationError
from apis.k8s.workloads import controller_of, scaled_value
from cli.bench.soak.invariants.base import Bounds, Invariant, Violation
from cli.bench.soak.state import ClusterState

__all__ = ["invariants", "job_incomplete", "not_ready", "over_surge"]

Obj = Mapping[str, Any]


def invariants(bounds: Bounds) -> list[Invariant]:
    return [
        Invariant("deployment-over-surge", over_surge, grace_s=bounds.workload_settle_s),
        Invariant("deployment-not-ready", not_ready, grace_s=bounds.pending_s),
        Invariant("job-not-complete", job_incomplete, grace_s=bounds.pending_s + bounds.job_run_s),
    ]


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _live(obj: Obj) -> bool:
    return not (obj.get("metadata") or {}).get("deletionTimestamp")


def _replicas(deployment: Obj) -> int:
    replicas = (deployment.get("spec") or {}).get("replicas", 1)
    return replicas if isinstance(replicas, int) else 1


def _max_surge(deployment: Obj) -> int:
    """maxSurge as a count (Kubernetes' default 25 %, rounded up); 0 for Recreate."""
    strategy = (deployment.get("spec") or {}).get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    value = (strategy.get("rollingUpdate") or {}).get("maxSurge", "25%")
    try:
        return scaled_value(value, _replicas(deployment), round_up=True)
    except ValidationError:
        return 0


def over_surge(state: ClusterState) -> list[Violation]:
    owner_of_rs: dict[str, str] = {}
    for rs in state.replicasets:
        ref = controller_of(rs)
        if ref is not None and ref.get("kind") == "Deployment":
            owner_of_rs[(rs.get("metadata") or {}).get("uid", "")] = ref.get("uid", "")
    active: Counter[str] = Counter()
    pods_of: dict[str, list[str]] = {}
    for pod in state.pods:
        if pod.meta.deletion_timestamp or pod.phase in ("Succeeded", "Failed"):
            continue
        for owner in pod.meta.owner_references:
            if owner.controller and owner.kind == "ReplicaSet" and owner.uid in owner_of_rs:
                deployment_uid = owner_of_rs[owner.uid]
                active[deployment_uid] += 1
                pods_of.setdefault(deployment_uid, []).append(pod.key)
    violations = []
    for d in state.deployments:
        uid = (d.get("metadata") or {}).get("uid", "")
        limit = _replicas(d) + _max_surge(d)
        if _live(d) and active[uid] > limit:
            violations.append(
                Violation(
                    "deployment-over-surge",
                    (f"deployment {_key(d)}", *sorted(pods_of[uid])),
                    f"{active[uid]} active pods, more than replicas + maxSurge = {limit}",
                )
            )
    return violations


def not_ready(state: ClusterState) -> list[Violation]:
    violations = []
    for d in state.deployments:
        ready = (d.get("status") or {}).get("readyReplicas") or 0
        if _live(d) and ready < _replicas(d):
            violations.append(
                Violation(
                    "deployment-not-ready",
                    (f"deployment {_key(d)}",),
                    f"{ready} of {_replicas(d)} replicas ready",
                )
            )
    return violations


def job_incomplete(state: ClusterState) -> list[Violation]:
    """A Job not (yet) Complete, or Failed (which it never should be: its pods exit 0)."""
    violations = []
    for job in state.jobs:
        conditions = {c.get("type"): c.get("status") for c in (job.get("status") or {}).get("conditions") or ()}
        if _live(job) and conditions.get("Complete") != "True":
            failed = " and Failed" if conditions.get("Failed") == "True" else ""
            violations.append(Violation("job-not-complete", (f"job {_key(job)}",), f"not Complete{failed}"))
    return violations
