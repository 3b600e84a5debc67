"""The Migrations table as plain values: each PodMigrationJob, the pod it moves, from which node
to which, the Reservation it made, and what its executor last said.

Pure functions over parsed `PodMigrationJob`s (and `Invalid` ones, listed with their parse
error) and the pods and Reservations the informers hold; times are absolute, as in
`dashboard.reservations`. The job itself records the
target (`status.nodeName`, the node its Reservation was placed on; before that the planner's
`migration-target-node` annotation, shown as planned) but not the source, so "from" is the node
of the pod it names while that pod exists (matched by UID once the descheduler pinned it), and
'' after it is gone. The Reservation is `spec.reservationOptions.reservationRef`, else the one
labelled with the job's name (the descheduler writes both).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from apis.crds.podmigrationjob import MigrationPhase, PodMigrationJob
from apis.crds.reservation import Reservation
from apis.extension import names
from apis.k8s.core import Pod
from apis.k8s.meta import Condition
from dashboard import workload
from dashboard.invalid import Invalid

__all__ = ["INVALID", "MigrationRow", "rows"]

INVALID: Final = "Invalid"
#: Table order: in flight first, then waiting to start, then the invalid and the ended.
_ORDER: Final = {
    MigrationPhase.RUNNING.value: 0,
    MigrationPhase.PENDING.value: 1,
    INVALID: 2,
    MigrationPhase.FAILED.value: 3,
    MigrationPhase.ABORTED.value: 3,
    MigrationPhase.SUCCEEDED.value: 3,
}


@dataclass(frozen=True, slots=True)
class MigrationRow:
    name: str
    phase: str  # a MigrationPhase's value, or INVALID
    mode: str
    pod: str  # namespace/name of the pod it moves
    from_node: str  # '' once the pod is gone
    to_node: str
    #: `to_node` is the planner's choice, not yet where a Reservation was placed.
    to_planned: bool
    reservation: str
    reservation_phase: str  # '' when the Reservation is not (or no longer) there
    #: The step it is at (`status.status`) and the executor's `reason`, `message`.
    step: str
    reason: str
    message: str
    #: Why the descheduler created it (the strategy's annotation), '' for a user's job.
    why: str
    created: float | None  # seconds since the epoch; None when unreadable
    paused: bool = False
    conditions: tuple[Condition, ...] = ()


def _pod_of(job: PodMigrationJob, by_uid: dict[str, Pod], by_key: dict[str, Pod]) -> Pod | None:
    ref = job.pod_ref
    if ref.uid:
        return by_uid.get(ref.uid)
    return by_key.get(f"{ref.namespace or 'default'}/{ref.name}")


def _reservation_of(job: PodMigrationJob, reservations: Sequence[Reservation]) -> tuple[str, Reservation | None]:
    if job.reservation_ref is not None and job.reservation_ref.name:
        name = job.reservation_ref.name
        return name, next((r for r in reservations if r.name == name), None)
    made = next((r for r in reservations if r.meta.labels.get(names.LABEL_MIGRATION_JOB) == job.name), None)
    return (made.name, made) if made is not None else ("", None)


def _row(
    job: PodMigrationJob,
    *,
    pod: Pod | None,
    reservations: Sequence[Reservation],
) -> MigrationRow:
    name, reservation = _reservation_of(job, reservations)
    planned = job.meta.annotations.get(names.ANNOTATION_MIGRATION_TARGET_NODE, "")
    to_node = job.node_name or (reservation.node_name if reservation is not None else "")
    return MigrationRow(
        name=job.name,
        phase=job.phase.value,
        mode=job.mode.value,
        pod=f"{job.pod_ref.namespace or 'default'}/{job.pod_ref.name or job.pod_ref.uid}",
        from_node=pod.node_name if pod is not None else "",
        to_node=to_node or planned,
        to_planned=not to_node and bool(planned),
        reservation=name,
        reservation_phase=reservation.phase.value if reservation is not None else "",
        step=job.status,
        reason=job.reason,
        message=job.message,
        why=job.meta.annotations.get(names.ANNOTATION_MIGRATION_REASON, ""),
        created=workload.epoch_seconds(job.meta.creation_timestamp),
        paused=job.paused,
        conditions=job.conditions,
    )


def _invalid_row(bad: Invalid) -> MigrationRow:
    return MigrationRow(
        name=bad.name,
        phase=INVALID,
        mode="",
        pod="",
        from_node="",
        to_node="",
        to_planned=False,
        reservation="",
        reservation_phase="",
        step="",
        reason="Invalid",
        message=bad.error,
        why="",
        created=workload.epoch_seconds(bad.created),
    )


def rows(
    jobs: Iterable[PodMigrationJob | Invalid],
    *,
    pods: Iterable[Pod],
    reservations: Iterable[Reservation | Invalid],
) -> Sequence[MigrationRow]:
    """Every PodMigrationJob: running first, then pending, invalid, ended; newest first within."""
    pods = list(pods)
    by_uid = {p.meta.uid: p for p in pods if p.meta.uid}
    by_key = {p.key: p for p in pods}
    parsed = [r for r in reservations if isinstance(r, Reservation)]
    out = [
        _invalid_row(j) if isinstance(j, Invalid) else _row(j, pod=_pod_of(j, by_uid, by_key), reservations=parsed)
        for j in jobs
    ]
    return sorted(out, key=lambda m: (_ORDER.get(m.phase, 2), -(m.created or 0.0), m.name))
