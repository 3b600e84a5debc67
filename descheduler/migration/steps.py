"""What a PodMigrationJob does next: a pure function of the job, its pod, its Reservation and
the time — so a descheduler killed at any point resumes from the API objects alone.

    plan(job, facts) -> Step(kind, status, rollback)

`kind` says what the executor does: WAIT (write `status` if it changed), ADMIT (ask the
arbiter's first gate, then start), CREATE_RESERVATION, EVICT (ask the second gate, then
evict), SUCCEED or FAIL (write `status`; `rollback` deletes the Reservation, which happens for
every failure before the pod was evicted: the pod is left alone and the held resources free).

ReservationFirst, as Koordinator runs it:

    Pending --admit--> Running: ReservationCreated → ReservationScheduled (Available)
      → Eviction (False Evicting → True EvictComplete) → PodBoundReservation → Succeeded

`status.status` is the condition being worked on, as Koordinator writes it (`ReservationCreated`,
`ReservationScheduled`, `Eviction`, `PodBoundReservation`), and `Complete` once succeeded; a
failure keeps it and says why in `reason` and `message`, in Koordinator's words where Koordinator
has the case (`Abort job caused by timeout`, ...).

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
from descheduler.migration.status import JobStatus, quoted, stamp

__all__ = ["WAITING_FOR_BIND", "Facts", "Step", "StepKind", "plan"]

#: Koordinator's message while the replacement is not yet bound to the Reservation.
WAITING_FOR_BIND = "Waiting for Pod bind Reservation"


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
    evicted = status.evicting_or_evicted
    rsv = facts.reservation
    rsv_name = rsv.name if rsv is not None else reservations.name_for_job(job)

    def fail(reason: str, message: str) -> Step:
        return Step(
            StepKind.FAIL,
            status.at(MigrationPhase.FAILED, status.status, reason=reason, message=message),
            rollback=True,
        )

    if facts.now >= facts.deadline:
        if rsv is not None and rsv.phase is ReservationPhase.PENDING and _unschedulable(rsv):
            return fail(pmj.REASON_UNSCHEDULABLE, _scheduled_message(rsv) or f"Reservation {rsv.name!r} unschedulable")
        return fail(pmj.REASON_TIMEOUT, "Abort job caused by timeout")
    if job.paused:
        return Step(StepKind.WAIT, status.at(status.phase, status.status, message="spec.paused is true"))

    if job.phase is MigrationPhase.PENDING:
        if _pod_gone(facts.pod):
            return fail(pmj.REASON_MISSING_POD, f"Abort job caused by missing Pod {quoted(pod_name)}")
        if not facts.has_controller:
            return fail(
                pmj.REASON_FORBIDDEN_MIGRATE_POD, f"Pod {quoted(pod_name)} has no controller: nothing would recreate it"
            )
        return Step(StepKind.ADMIT, status.at(MigrationPhase.RUNNING, ""))

    if job.mode is MigrationMode.EVICT_DIRECTLY:
        return _evict_directly(status, facts, pod_name, evicted, now)

    # --- ReservationFirst, Running ---------------------------------------------------------------
    if rsv is None:
        missing = f"Abort job caused by missing Reservation {quoted(rsv_name)}"
        if evicted or status.is_true(pmj.CONDITION_RESERVATION_CREATED):
            return fail(pmj.REASON_MISSING_RESERVATION, missing)
        if job.reservation_ref is not None and not reservations.made_by_job(job):
            return fail(pmj.REASON_MISSING_RESERVATION, f"{missing} (spec.reservationOptions.reservationRef)")
        if _pod_gone(facts.pod):
            return fail(pmj.REASON_MISSING_POD, f"Abort job caused by missing Pod {quoted(pod_name)}")
        return Step(
            StepKind.CREATE_RESERVATION,
            status.with_condition(pmj.CONDITION_RESERVATION_CREATED, True, now=now).at(
                MigrationPhase.RUNNING, pmj.CONDITION_RESERVATION_CREATED
            ),
        )
    status = status.with_condition(pmj.CONDITION_RESERVATION_CREATED, True, now=now)
    if rsv.phase is ReservationPhase.FAILED or (rsv.phase is ReservationPhase.PENDING and rsv.expired(facts.now)):
        return fail(pmj.REASON_RESERVATION_EXPIRED, "Reservation expired")
    if rsv.phase is ReservationPhase.PENDING:
        reason, message = (
            (pmj.REASON_UNSCHEDULABLE, _scheduled_message(rsv)) if _unschedulable(rsv) else ("Pending", "")
        )
        waiting = status.with_condition(
            pmj.CONDITION_RESERVATION_SCHEDULED, False, reason=reason, message=message, now=now
        )
        return Step(
            StepKind.WAIT,
            waiting.at(MigrationPhase.RUNNING, pmj.CONDITION_RESERVATION_SCHEDULED, reason=reason, message=message),
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
            pmj.CONDITION_POD_BOUND_RESERVATION,
            False,
            reason=pmj.REASON_WAIT_FOR_POD_BIND_RESERVATION,
            message=WAITING_FOR_BIND,
            now=now,
        )
        return Step(
            StepKind.WAIT,
            waiting.at(
                MigrationPhase.RUNNING,
                pmj.CONDITION_POD_BOUND_RESERVATION,
                reason=pmj.REASON_WAIT_FOR_POD_BIND_RESERVATION,
                message=WAITING_FOR_BIND,
            ),
        )
    new_pod = f"{facts.replacement.namespace}/{facts.replacement.name}"
    message = f"Bind Pod {quoted(new_pod)} in Reservation {quoted(rsv.name)}"
    done = status.with_condition(pmj.CONDITION_POD_BOUND_RESERVATION, True, message=message, now=now)
    done = replace(done, pod_ref=facts.replacement)
    return Step(StepKind.SUCCEED, done.at(MigrationPhase.SUCCEEDED, pmj.STATUS_COMPLETE, message=message))


def _eviction(status: JobStatus, facts: Facts, pod_name: str, evicted: bool) -> Step | None:
    """EVICT, or WAIT while the evicted pod terminates; None once it is gone."""
    if _pod_gone(facts.pod):
        return None
    if not evicted:
        return Step(StepKind.EVICT, status.at(MigrationPhase.RUNNING, pmj.CONDITION_EVICTION))
    return Step(StepKind.WAIT, status.at(MigrationPhase.RUNNING, pmj.CONDITION_EVICTION, reason=pmj.REASON_EVICTING))


def _evict_directly(status: JobStatus, facts: Facts, pod_name: str, evicted: bool, now: str) -> Step:
    ongoing = _eviction(status, facts, pod_name, evicted)
    if ongoing is not None:
        return ongoing
    done = status.with_condition(pmj.CONDITION_EVICTION, True, reason=pmj.REASON_EVICT_COMPLETE, now=now)
    message = f"Pod {quoted(pod_name)} has been evicted"
    return Step(StepKind.SUCCEED, done.at(MigrationPhase.SUCCEEDED, pmj.STATUS_COMPLETE, message=message))


def _unschedulable(rsv: Reservation) -> bool:
    return any(c.type == "Scheduled" and c.status == "False" and c.reason == RSV_UNSCHEDULABLE for c in rsv.conditions)


def _scheduled_message(rsv: Reservation) -> str:
    return next((c.message for c in rsv.conditions if c.type == "Scheduled"), "")
