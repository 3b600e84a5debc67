"""Migrations: ReservationFirst evicts only once its Reservation is Available, no PodMigrationJob
outlives its ttl, and migrations never leave a Deployment short of replicas − maxUnavailable.

The first is judged from the job's own conditions, which the descheduler writes step by step
(`descheduler/migration/steps.py`): an `Eviction` condition True needs a `ReservationScheduled`
condition True that became so no later (whole seconds, as Kubernetes writes them). A job still
running `Bounds.migration_slack_s` past its deadline (creation + `spec.ttl`, else the descheduler's
default) is stuck; the grace starts over at every kill (the descheduler itself may be the victim).
A Deployment's ready pods (not being deleted, through its ReplicaSets) below replicas −
maxUnavailable for `Bounds.migration_settle_s` after the last disturbance is a migration that
took a pod away before its replacement was ready (the soak's Deployments have maxUnavailable 0:
only an eviction takes a ready pod away, and its replacement — placed onto its Reservation — is
ready within seconds).
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Mapping
from typing import Any

from apis.crds import podmigrationjob as pmj
from apis.crds.podmigrationjob import MigrationMode, PodMigrationJob
from apis.errors import ValidationError
from apis.k8s.workloads import controller_of, scaled_value
from cli.bench.soak.invariants.base import Bounds, Invariant, Violation
from cli.bench.soak.state import ClusterState

__all__ = ["below_available", "evicted_before_reservation", "invariants", "stuck"]


def invariants(bounds: Bounds) -> list[Invariant]:
    def stuck_here(state: ClusterState) -> list[Violation]:
        return stuck(state, default_ttl_s=bounds.migration_default_ttl_s)

    return [
        Invariant("migration-evicted-before-reservation", evicted_before_reservation),
        Invariant("migration-stuck", stuck_here, grace_s=bounds.migration_slack_s),
        Invariant("deployment-below-available", below_available, grace_s=bounds.migration_settle_s),
    ]


def _time(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def evicted_before_reservation(state: ClusterState) -> list[Violation]:
    violations = []
    for job in state.migrations:
        eviction = job.condition(pmj.CONDITION_EVICTION)
        if job.mode is not MigrationMode.RESERVATION_FIRST or eviction is None or eviction.status != "True":
            continue
        scheduled = job.condition(pmj.CONDITION_RESERVATION_SCHEDULED)
        evicted_at, scheduled_at = _time(eviction.last_transition_time), None
        if scheduled is not None and scheduled.status == "True":
            scheduled_at = _time(scheduled.last_transition_time)
        if scheduled_at is None or (evicted_at is not None and evicted_at < scheduled_at):
            when = scheduled.last_transition_time if scheduled is not None else "never"
            violations.append(
                Violation(
                    "migration-evicted-before-reservation",
                    (f"podmigrationjob/{job.name}",),
                    f"{job.name} evicted its pod at {eviction.last_transition_time}; its reservation "
                    f"was Available at {when}",
                )
            )
    return violations


def _deadline(job: PodMigrationJob, default_ttl_s: float) -> float | None:
    created = _time(job.meta.creation_timestamp)
    if created is None:
        return None
    return created.timestamp() + (job.ttl_seconds or default_ttl_s)


def stuck(state: ClusterState, *, default_ttl_s: float) -> list[Violation]:
    """Jobs not finished although their deadline has passed (the grace is the slack)."""
    violations = []
    for job in state.migrations:
        deadline = _deadline(job, default_ttl_s)
        if not job.phase.terminal and deadline is not None and state.now > deadline:
            violations.append(
                Violation(
                    "migration-stuck",
                    (f"podmigrationjob/{job.name}",),
                    f"{job.name} is {job.phase.value} ({job.status or 'no step'}) past its ttl",
                )
            )
    return violations


Obj = Mapping[str, Any]


def _floor(deployment: Obj) -> int:
    """replicas − maxUnavailable (Kubernetes' default 25 %, rounded down)."""
    spec = deployment.get("spec") or {}
    replicas = spec.get("replicas", 1) if isinstance(spec.get("replicas", 1), int) else 1
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    try:
        unavailable = scaled_value(
            (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%"), replicas, round_up=False
        )
    except ValidationError:
        return 0
    return int(replicas) - unavailable


def below_available(state: ClusterState) -> list[Violation]:
    deployment_of_rs = {}
    for rs in state.replicasets:
        ref = controller_of(rs)
        if ref is not None and ref.get("kind") == "Deployment":
            deployment_of_rs[(rs.get("metadata") or {}).get("uid", "")] = ref.get("uid", "")
    ready: Counter[str] = Counter()
    for pod in state.pods:
        if pod.meta.deletion_timestamp or pod.is_terminal:
            continue
        if not any(c.type == "Ready" and c.status == "True" for c in pod.conditions):
            continue
        for owner in pod.meta.owner_references:
            if owner.controller and owner.kind == "ReplicaSet" and owner.uid in deployment_of_rs:
                ready[deployment_of_rs[owner.uid]] += 1
    violations = []
    for d in state.deployments:
        meta = d.get("metadata") or {}
        uid, floor = meta.get("uid", ""), _floor(d)
        if not meta.get("deletionTimestamp") and ready[uid] < floor:
            key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
            violations.append(
                Violation(
                    "deployment-below-available",
                    (f"deployment {key}",),
                    f"{ready[uid]} ready pods, fewer than replicas − maxUnavailable = {floor}",
                )
            )
    return violations
