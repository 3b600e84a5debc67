"""The next step of a PodMigrationJob, from the API objects alone (descheduler.migration.steps)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from apis.crds.podmigrationjob import MigrationPhase, PodMigrationJob
from apis.crds.reservation import ObjectRef, Reservation
from apis.k8s.meta import Condition
from descheduler.migration.status import JobStatus, step_events
from descheduler.migration.steps import Facts, StepKind, plan

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1", "controller": True}


def job(phase: str = "Pending", conditions: tuple[dict[str, Any], ...] = (), **spec: Any) -> PodMigrationJob:
    return PodMigrationJob.from_dict(
        {
            "metadata": {"name": "j", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"podRef": {"namespace": "ns", "name": "p"}, **spec},
            "status": {"phase": phase, "conditions": list(conditions)},
        }
    )


def pod(*, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "u1", "ownerReferences": [OWNER]}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    return {"metadata": meta, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}


def rsv(phase: str = "Pending", node: str = "", conditions: tuple[dict[str, Any], ...] = ()) -> Reservation:
    return Reservation.from_dict(
        {
            "metadata": {"name": "pmj-j", "uid": "r1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {
                "template": {"metadata": {"namespace": "ns"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
                "owners": [{"controller": {**OWNER, "namespace": "ns"}}],
            },
            "status": {"phase": phase, "nodeName": node, "conditions": list(conditions)},
        }
    )


def facts(
    *,
    p: dict[str, Any] | None = None,
    r: Reservation | None = None,
    at: float = 1.0,
    controller: bool = True,
    replacement: ObjectRef | None = None,
) -> Facts:
    return Facts(
        now=T0 + datetime.timedelta(seconds=at),
        deadline=T0 + datetime.timedelta(seconds=300),
        pod=p,
        has_controller=controller,
        reservation=r,
        replacement=replacement,
    )


CREATED = {"type": "ReservationCreated", "status": "True"}
SCHEDULED = {"type": "ReservationScheduled", "status": "True"}
EVICTING = {"type": "Eviction", "status": "False", "reason": "Evicting"}  # as Koordinator writes it


def test_a_pending_job_is_admitted_only_when_its_pod_exists_and_has_a_controller() -> None:
    assert plan(job(), facts(p=pod())).kind is StepKind.ADMIT
    missing = plan(job(), facts(p=None))
    assert (missing.kind, missing.status.reason) == (StepKind.FAIL, "MissingPod")
    bare = plan(job(), facts(p=pod(), controller=False))
    assert (bare.kind, bare.status.reason, bare.status.phase) == (
        StepKind.FAIL,
        "ForbiddenMigratePod",
        MigrationPhase.FAILED,
    )


def test_reservation_first_creates_then_waits_for_an_available_reservation() -> None:
    assert plan(job("Running"), facts(p=pod())).kind is StepKind.CREATE_RESERVATION
    waiting = plan(job("Running", (CREATED,)), facts(p=pod(), r=rsv()))
    assert waiting.kind is StepKind.WAIT
    assert waiting.status.condition("ReservationScheduled").status == "False"  # type: ignore[union-attr]


def test_never_evicts_while_the_reservation_is_pending_even_when_it_is_unschedulable() -> None:
    unschedulable = ({"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"},)
    step = plan(job("Running", (CREATED,)), facts(p=pod(), r=rsv(conditions=unschedulable)))
    assert step.kind is StepKind.WAIT
    assert (step.status.reason, step.status.message) == ("Unschedulable", "0/3 nodes")
    late = plan(job("Running", (CREATED,)), facts(p=pod(), r=rsv(conditions=unschedulable), at=301))
    assert (late.kind, late.status.reason, late.rollback) == (StepKind.FAIL, "Unschedulable", True)


def test_an_available_reservation_leads_to_the_eviction() -> None:
    step = plan(job("Running", (CREATED,)), facts(p=pod(), r=rsv("Available", "n2")))
    assert step.kind is StepKind.EVICT
    assert step.status.node_name == "n2"


def test_after_the_eviction_it_waits_for_the_replacement_then_succeeds() -> None:
    running = job("Running", (CREATED, SCHEDULED, EVICTING))
    waiting = plan(running, facts(p=None, r=rsv("Available", "n2")))
    assert (waiting.kind, waiting.status.status, waiting.status.reason) == (
        StepKind.WAIT,
        "PodBoundReservation",
        "WaitForPodBindReservation",
    )
    assert waiting.status.condition("Eviction") == Condition(
        "Eviction", "True", "EvictComplete", "", "2026-01-01T00:00:01Z"
    )
    new = ObjectRef(namespace="ns", name="p2", uid="u2")
    done = plan(running, facts(p=None, r=rsv("Succeeded", "n2"), replacement=new))
    assert (done.kind, done.status.phase, done.status.pod_ref) == (StepKind.SUCCEED, MigrationPhase.SUCCEEDED, new)
    # Koordinator's words: `kubectl get pmj` shows STATUS Complete.
    assert (done.status.status, done.status.message) == ("Complete", 'Bind Pod "ns/p2" in Reservation "pmj-j"')
    assert step_events(waiting.status, done.status, reservation="pmj-j", pod="ns/p") == []
    before = plan(job("Running", (CREATED,)), facts(p=pod(), r=rsv("Available", "n2"))).status
    assert step_events(JobStatus.of(running), waiting.status, reservation="pmj-j", pod="ns/p") == [
        ("EvictComplete", 'Pod "ns/p" has been evicted'),
        ("WaitForPodBindReservation", "Waiting for Pod bind Reservation"),
    ]
    assert step_events(JobStatus.of(job("Running", (CREATED,))), before, reservation="pmj-j", pod="ns/p") == [
        ("ReservationScheduled", 'Assigned Reservation "pmj-j" to node "n2"')
    ]


def test_a_pod_gone_after_a_crash_counts_as_evicted() -> None:
    """Killed between the eviction and writing the Eviction condition: no second eviction."""
    step = plan(job("Running", (CREATED,)), facts(p=pod(deleting=True), r=rsv("Available", "n2")))
    assert step.kind is StepKind.WAIT
    assert step.status.is_true("Eviction")


@pytest.mark.parametrize(
    ("reservation", "reason"),
    [
        (None, "MissingReservation"),
        (rsv("Failed"), "ReservationExpired"),
    ],
)
def test_a_lost_reservation_fails_and_rolls_back(reservation: Reservation | None, reason: str) -> None:
    step = plan(job("Running", (CREATED,)), facts(p=pod(), r=reservation))
    assert (step.kind, step.status.reason, step.rollback) == (StepKind.FAIL, reason, True)


def test_the_ttl_ends_a_job_and_a_paused_job_waits() -> None:
    late = plan(job("Running", (CREATED,)), facts(p=pod(), r=rsv(), at=400))
    assert (late.kind, late.status.reason, late.status.message) == (
        StepKind.FAIL,
        "Timeout",
        "Abort job caused by timeout",
    )
    assert late.status.status == ""  # a failure keeps the step it failed at, as Koordinator's
    paused = plan(job("Running", paused=True), facts(p=pod()))
    assert (paused.kind, paused.status.message) == (StepKind.WAIT, "spec.paused is true")


def test_evict_directly_evicts_then_succeeds_once_the_pod_is_gone() -> None:
    assert plan(job("Running", mode="EvictDirectly"), facts(p=pod())).kind is StepKind.EVICT
    done = plan(job("Running", (EVICTING,), mode="EvictDirectly"), facts(p=None))
    assert done.kind is StepKind.SUCCEED


def test_a_named_reservation_that_does_not_exist_is_not_created() -> None:
    step = plan(job("Running", reservationOptions={"reservationRef": {"name": "theirs"}}), facts(p=pod()))
    assert (step.kind, step.status.reason) == (StepKind.FAIL, "MissingReservation")
    assert "theirs" in step.status.message
