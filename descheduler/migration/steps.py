"""What a PodMigrationJob does next: a pure function of the job, its pod, its Reservation and
the time — so a descheduler killed at any point resumes from the API objects alone.

    plan(job, facts) -> Step(kind, status, rollback)

`kind` says what the executor does: WAIT (write `status` if it changed), ADMIT (ask the
arbiter's first gate, then start), CREATE_RESERVATION, EVICT (ask the second gate, then
evict), SUCCEED or FAIL (write `status`; `rollback` deletes the Reservation, which happens for
every failure before the pod was evicted: the pod is left alone and the held resources free).

ReservationFirst, as Koordinator runs it:

    Pending --admit--> Running: ReservationCreated → ReservationScheduled (Available)
      → Eviction (Evicting → EvictComplete) → PodBoundReservation → Succeeded

What was done is read from the objects, not remembered: a Reservation named after the job that
exists was created; a pod that is gone (or terminating) once the Reservation is Available was
evicted (by us before a crash, or by someone else: either way its replacement is coming); a pod
carrying the `reservation-allocated` annotation naming the Reservation (or the Reservation's
`currentOwners`) is the replacement, bound.
"""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass, replace

from apis.crds import podmigrationjob as pmj
from apis.crds.podmigrationjob import MigrationMode, MigrationPhase, PodMigrationJob
from apis.crds.reservation import REASON_UNSCHEDULABLE as RSV_UNSCHEDULABLE
from apis.crds.reservation import ObjectRef, Reservation, ReservationPhase
from descheduler.cluster import Obj
from descheduler.migration import reservation as reservations
from descheduler.migration.status import JobStatus, stamp

__all__ = ["Facts", "Step", "StepKind", "plan"]


class StepKind(enum.Enum):
    WAIT = "wait"
    ADMIT = "admit"
    CREATE_RESERVATION = "create-reservation"
    EVICT = "evict"
    SUCCEED = "succeed"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Facts:
    """What the executor found for one job."""

    now: datetime.datetime
    #: creation + ttl (the job's own, else the default).
    deadline: datetime.datetime
    #: The pod to move, when it still exists (same uid as the job's podRef once recorded).
    pod: Obj | None
    #: Whether something recreates the pod (a controller reference).
    has_controller: bool
    #: The job's Reservation (the one named in reservationOptions, else `pmj-<job>`), if it exists.
    reservation: Reservation | None
    #: A pod placed onto that Reservation (its replacement), if any.
    replacement: ObjectRef | None


@dataclass(frozen=True, slots=True)
class Step:
    kind: StepKind
    status: JobStatus
    rollback: bool = False


def _pod_gone(pod: Obj | None) -> bool:
    if pod is None:
        return True
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    return bool(meta.get("deletionTimestamp")) or status.get("phase") in ("Succeeded", "Failed")


def plan(job: PodMigrationJob, facts: Facts) -> Step:
    now = stamp(facts.now)
    status = JobStatus.of(job)
    pod_name = f"{job.pod_ref.namespace}/{job.pod_ref.name}" if job.pod_ref.name else job.pod_ref.uid
    evicted = status.is_true(pmj.CONDITION_EVICTION)
    rsv = facts.reservation

    def fail(reason: str, message: str) -> Step:
        return Step(
            StepKind.FAIL, status.at(MigrationPhase.FAILED, "Failed", reason=reason, message=message), rollback=True
        )

    if facts.now >= facts.deadline:
        if rsv is not None and rsv.phase is ReservationPhase.PENDING and _unschedulable(rsv):
            return fail(pmj.REASON_UNSCHEDULABLE, f"reservation {rsv.name} could not be scheduled before the ttl")
        return fail(pmj.REASON_TIMEOUT, f"the job did not finish within its ttl (deadline {stamp(facts.deadline)})")
    if job.paused:
        return Step(StepKind.WAIT, status.at(status.phase, "Paused", message="spec.paused is true"))

    if job.phase is MigrationPhase.PENDING:
        if _pod_gone(facts.pod):
            return fail(pmj.REASON_MISSING_POD, f"pod {pod_name} does not exist or is terminating")
        if not facts.has_controller:
            return fail(
                pmj.REASON_FORBIDDEN_MIGRATE_POD, f"pod {pod_name} has no controller: nothing would recreate it"
            )
        return Step(StepKind.ADMIT, status.at(MigrationPhase.RUNNING, "Admitted"))

    if job.mode is MigrationMode.EVICT_DIRECTLY:
        return _evict_directly(status, facts, pod_name, evicted, now)

    # --- ReservationFirst, Running ---------------------------------------------------------------
    if rsv is None:
        if evicted:
            return fail(pmj.REASON_MISSING_RESERVATION, "the reservation disappeared after the pod was evicted")
        if status.is_true(pmj.CONDITION_RESERVATION_CREATED):
            return fail(pmj.REASON_MISSING_RESERVATION, "the reservation was deleted before it was used")
        if job.reservation_ref is not None and not reservations.made_by_job(job):
            return fail(
                pmj.REASON_MISSING_RESERVATION,
                f"reservation {job.reservation_ref.name} (spec.reservationOptions.reservationRef) does not exist",
            )
        if _pod_gone(facts.pod):
            return fail(pmj.REASON_MISSING_POD, f"pod {pod_name} disappeared before the reservation was created")
        return Step(
            StepKind.CREATE_RESERVATION,
            status.with_condition(pmj.CONDITION_RESERVATION_CREATED, True, now=now).at(
                MigrationPhase.RUNNING, pmj.CONDITION_RESERVATION_CREATED
            ),
        )
    status = status.with_condition(pmj.CONDITION_RESERVATION_CREATED, True, now=now)
    if rsv.phase is ReservationPhase.FAILED or (rsv.phase is ReservationPhase.PENDING and rsv.expired(facts.now)):
        return fail(pmj.REASON_RESERVATION_EXPIRED, f"reservation {rsv.name} expired or failed before it was used")
    if rsv.phase is ReservationPhase.PENDING:
        reason, message = (
            (pmj.REASON_UNSCHEDULABLE, _scheduled_message(rsv)) if _unschedulable(rsv) else ("Pending", "")
        )
        waiting = status.with_condition(
            pmj.CONDITION_RESERVATION_SCHEDULED, False, reason=reason, message=message, now=now
        )
        return Step(
            StepKind.WAIT,
            waiting.at(MigrationPhase.RUNNING, "WaitForReservationScheduled", reason=reason, message=message),
        )
    # Available (or already consumed: Succeeded, or Waiting on its owner).
    status = status.with_condition(pmj.CONDITION_RESERVATION_SCHEDULED, True, now=now)
    if rsv.node_name:
        status = replace(status, node_name=rsv.node_name)
    ongoing = _eviction(status, facts, pod_name, evicted)
    if ongoing is not None:
        return ongoing
    status = status.with_condition(pmj.CONDITION_EVICTION, True, reason=pmj.REASON_EVICT_COMPLETE, now=now)
    if facts.replacement is None:
        waiting = status.with_condition(
            pmj.CONDITION_POD_BOUND_RESERVATION, False, reason=pmj.REASON_WAIT_FOR_POD_BIND_RESERVATION, now=now
        )
        return Step(StepKind.WAIT, waiting.at(MigrationPhase.RUNNING, pmj.REASON_WAIT_FOR_POD_BIND_RESERVATION))
    done = status.with_condition(pmj.CONDITION_POD_BOUND_RESERVATION, True, now=now)
    done = replace(done, pod_ref=facts.replacement)
    message = f"pod {pod_name} replaced by {facts.replacement.namespace}/{facts.replacement.name} on {rsv.node_name}"
    return Step(StepKind.SUCCEED, done.at(MigrationPhase.SUCCEEDED, "Succeeded", message=message))


def _eviction(status: JobStatus, facts: Facts, pod_name: str, evicted: bool) -> Step | None:
    """EVICT, or WAIT while the evicted pod terminates; None once it is gone."""
    if _pod_gone(facts.pod):
        return None
    if not evicted:
        return Step(StepKind.EVICT, status.at(MigrationPhase.RUNNING, pmj.REASON_EVICTING))
    message = f"waiting for pod {pod_name} to go"
    return Step(StepKind.WAIT, status.at(MigrationPhase.RUNNING, pmj.REASON_EVICTING, message=message))


def _evict_directly(status: JobStatus, facts: Facts, pod_name: str, evicted: bool, now: str) -> Step:
    ongoing = _eviction(status, facts, pod_name, evicted)
    if ongoing is not None:
        return ongoing
    done = status.with_condition(pmj.CONDITION_EVICTION, True, reason=pmj.REASON_EVICT_COMPLETE, now=now)
    return Step(StepKind.SUCCEED, done.at(MigrationPhase.SUCCEEDED, "Succeeded", message=f"pod {pod_name} evicted"))


def _unschedulable(rsv: Reservation) -> bool:
    return any(c.type == "Scheduled" and c.status == "False" and c.reason == RSV_UNSCHEDULABLE for c in rsv.conditions)


def _scheduled_message(rsv: Reservation) -> str:
    return next((c.message for c in rsv.conditions if c.type == "Scheduled"), "")
