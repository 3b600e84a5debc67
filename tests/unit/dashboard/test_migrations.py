"""The Migrations table over plain objects: order, pod, from → to, the Reservation, the reasons."""

from __future__ import annotations

import dataclasses
import datetime

from apis.crds.podmigrationjob import PodMigrationJob
from apis.extension import names
from dashboard import migrations
from dashboard.invalid import tolerant
from tests.support.gpuobjects import NOW, make_migration, make_pod, make_reservation, migration_manifest


def test_in_flight_jobs_come_first_then_pending_then_the_ended_newest_first() -> None:
    jobs = [
        make_migration("done-old", phase="Succeeded", created="2026-11-24T17:00:00Z"),
        make_migration("done-new", phase="Failed", created="2026-11-24T17:50:00Z"),
        make_migration("waiting", phase="Pending"),
        make_migration("moving", phase="Running", created="2026-11-24T17:10:00Z"),
    ]
    rows = migrations.rows(jobs, pods=[], reservations=[])
    assert [r.name for r in rows] == ["moving", "waiting", "done-new", "done-old"]


def test_a_running_job_shows_the_pod_from_its_node_to_its_reservations() -> None:
    pod = make_pod("train-0", namespace="ml", node="n1")
    namesake = make_pod("train-1", namespace="ml", node="n9")
    rsv = make_reservation("pmj-a", node="n2", gpus={0: 100})
    job = make_migration(
        "a",
        pod="ml/train-0",
        pod_uid=pod.meta.uid,
        phase="Running",
        reservation="pmj-a",
        reason="WaitForPodBindReservation",
        message="waiting for the replacement",
        annotations={names.ANNOTATION_MIGRATION_REASON: "defrag: room for ml/big"},
    )
    (row,) = migrations.rows([job], pods=[namesake, pod], reservations=[rsv])
    assert (row.pod, row.from_node, row.to_node, row.to_planned) == ("ml/train-0", "n1", "n2", False)
    assert (row.reservation, row.reservation_phase) == ("pmj-a", "Available")
    assert (row.reason, row.message, row.why) == (
        "WaitForPodBindReservation",
        "waiting for the replacement",
        "defrag: room for ml/big",
    )
    assert row.created == (NOW - datetime.timedelta(minutes=5)).timestamp()


def test_a_pinned_pod_that_is_gone_has_no_from_node_even_if_a_namesake_exists() -> None:
    namesake = make_pod("train-0", namespace="ml", node="n3")  # the replacement: another UID
    job = make_migration("a", pod="ml/train-0", pod_uid="uid-old", phase="Succeeded", node="n2")
    (row,) = migrations.rows([job], pods=[namesake], reservations=[])
    assert (row.from_node, row.to_node) == ("", "n2")


def test_before_a_reservation_is_placed_the_planners_target_is_shown_as_planned() -> None:
    job = make_migration("a", phase="Pending", annotations={names.ANNOTATION_MIGRATION_TARGET_NODE: "n7"})
    made = make_reservation("made-for-a")
    labelled = dataclasses.replace(made, meta=dataclasses.replace(made.meta, labels={names.LABEL_MIGRATION_JOB: "a"}))
    (row,) = migrations.rows([job], pods=[], reservations=[labelled])
    assert (row.to_node, row.to_planned) == ("n7", True)
    assert (row.reservation, row.reservation_phase) == ("made-for-a", "Pending")


def test_a_job_that_does_not_parse_is_listed_as_invalid_with_the_error() -> None:
    raw = migration_manifest("broken")
    raw["spec"]["ttl"] = "soon"
    parsed = tolerant("PodMigrationJob", PodMigrationJob.from_dict)(raw)
    (row,) = migrations.rows([parsed], pods=[], reservations=[])
    assert (row.name, row.phase, row.reason) == ("broken", migrations.INVALID, "Invalid")
    assert "spec.ttl" in row.message and "soon" in row.message
