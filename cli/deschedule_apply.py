"""`tessera deschedule --apply`: hand a plan's migrations to the descheduler as PodMigrationJobs.

One PodMigrationJob (mode ReservationFirst) per migration of each feasible plan, named after the
pod it moves (`defrag-NAME-UID8`), so running the command twice asks for nothing twice: a job
that exists already is reported and left alone. Each job says what the descheduler's own
defragmentation says on its jobs: where the replacement must go (`migration-target-node`: without
it the replacement's Reservation could land back on the node being freed), why
(`migration-reason`) and whom it serves (the `migration-for` label, the pending pod's uid: the
descheduler plans nothing more for that pod while the jobs run). Nothing else happens here — the descheduler
executes the jobs under its safety rules (a Reservation for the replacement first, rate and
disruption limits), and may refuse some.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from apis.crds.podmigrationjob import MigrationMode, PodMigrationJob
from apis.crds.reservation import ObjectRef
from apis.extension import names
from apis.k8s.meta import ObjectMeta
from kube import Client, crds, errors
from kube.resources import PODS
from scheduler import defrag

__all__ = ["Requested", "job_for", "request"]

#: Object names are DNS subdomains: at most 253 characters; keep them short and readable.
_NAME_LIMIT = 63


@dataclass(frozen=True, slots=True)
class Requested:
    """One migration handed over: the job's name and whether it was created or already there."""

    job: str
    pod: str
    created: bool


def job_for(migration: defrag.Migration, plan: defrag.MigrationPlan, pending_uid: str = "") -> PodMigrationJob:
    """The PodMigrationJob asking the descheduler to move `migration.pod` (ReservationFirst) to
    `migration.to_node`, for `plan`'s pending pod (whose uid is `pending_uid`, when known)."""
    namespace, _, name = migration.pod.rpartition("/")
    suffix = _dns(migration.uid or hashlib.sha256(migration.pod.encode()).hexdigest())[:8]
    base = _dns(name)[: _NAME_LIMIT - len(suffix) - 8]
    ref = ObjectRef(api_version="v1", kind="Pod", namespace=namespace, name=name, uid=migration.uid)
    reason = f"defragmentation (tessera deschedule --apply): make room for pending pod {plan.pod} on {plan.node}"
    meta = ObjectMeta(
        name=f"defrag-{base}-{suffix}",
        labels={names.LABEL_MIGRATION_FOR: pending_uid} if pending_uid else {},
        annotations={
            names.ANNOTATION_MIGRATION_REASON: reason,
            names.ANNOTATION_MIGRATION_POD: migration.pod,
            names.ANNOTATION_MIGRATION_TARGET_NODE: migration.to_node,
        },
    )
    return PodMigrationJob(meta=meta, pod_ref=ref, mode=MigrationMode.RESERVATION_FIRST)


def _dns(text: str) -> str:
    """`text` as a DNS label fragment: lower case, letters, digits and dashes."""
    return re.sub(r"[^a-z0-9-]", "-", text.lower()).strip("-")


def request(client: Client, plans: Iterable[defrag.MigrationPlan]) -> list[Requested]:
    """Create the jobs of every feasible plan, in plan order. Raises kube.APIError for anything
    but a job that exists already."""
    jobs = crds.pod_migration_jobs(client)
    out = []
    for plan in plans:
        if not plan.feasible:
            continue
        uid = _uid(client, plan.pod)
        for migration in plan.migrations:
            job = job_for(migration, plan, uid)
            try:
                jobs.create(job)
                created = True
            except errors.AlreadyExists:
                created = False
            out.append(Requested(job.name, migration.pod, created))
    return out


def _uid(client: Client, key: str) -> str:
    """The uid of pod `key` (namespace/name), or "" when it is gone meanwhile (its jobs still run:
    the room is made, only the link to the pod is missing)."""
    namespace, _, name = key.rpartition("/")
    try:
        return str(client.resource(PODS).get(name, namespace=namespace)["metadata"].get("uid") or "")
    except errors.NotFound:
        return ""
