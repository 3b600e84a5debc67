"""scheduler-plugins' PodGroup state machine (`scheduling.x-k8s.io`), as its controller moves it:
the cases of its own controller tests, and what it writes (occupiedBy, no scheduled count)."""

from __future__ import annotations

import dataclasses

import pytest

from apis.crds.podgroup import PodGroup, PodGroupPhase
from apis.extension import names
from apis.k8s.core import Pod
from apis.k8s.meta import ObjectMeta, OwnerReference
from controller.podgroups import GroupStatus, next_status
from controller.podgroups.status import next_upstream_status

NOW = "2026-01-02T03:04:05Z"


def group(phase: PodGroupPhase | None = PodGroupPhase.PENDING, minimum: int = 2) -> PodGroup:
    return PodGroup(
        ObjectMeta(name="pg", namespace="ns"),
        resource=names.UPSTREAM_POD_GROUPS,
        min_member=minimum,
        phase=phase or PodGroupPhase.PENDING,
        phase_given=phase is not None,
    )


def pods(count: int, phase: str = "Pending", owner: str = "") -> list[Pod]:
    refs = (OwnerReference("batch/v1", "Job", owner, "uid-1"),) if owner else ()
    return [
        Pod(meta=ObjectMeta(name=f"p{i}", namespace="ns", owner_references=refs), phase=phase) for i in range(count)
    ]


def settle(start: PodGroup, members: list[Pod]) -> PodGroup:
    """Reconcile until nothing changes, as the controller's own writes requeue the PodGroup."""
    current = start
    for _ in range(10):
        status = next_upstream_status(current, members)
        wanted = dataclasses.replace(
            current,
            phase=status.phase,
            running=status.running,
            succeeded=status.succeeded,
            failed=status.failed,
            occupied_by=status.occupied_by,
            phase_given=True,
        )
        if wanted == current and current.phase_given:
            return current
        current = wanted
    raise AssertionError("the status never settles")


@pytest.mark.parametrize(
    ("minimum", "count", "pod_phase", "previous", "expected"),
    [
        (2, 2, "Running", PodGroupPhase.SCHEDULING, PodGroupPhase.RUNNING),
        (2, 4, "Running", PodGroupPhase.SCHEDULING, PodGroupPhase.RUNNING),
        (2, 2, "Failed", PodGroupPhase.SCHEDULING, PodGroupPhase.FAILED),
        (2, 2, "Succeeded", PodGroupPhase.SCHEDULING, PodGroupPhase.FINISHED),
        (2, 2, "Pending", PodGroupPhase.PENDING, PodGroupPhase.SCHEDULING),
        (3, 2, "Running", PodGroupPhase.PENDING, PodGroupPhase.PENDING),
        (3, 2, "Pending", PodGroupPhase.PENDING, PodGroupPhase.PENDING),
        (4, 2, "Pending", PodGroupPhase.RUNNING, PodGroupPhase.PENDING),
        (2, 2, "Succeeded", PodGroupPhase.PENDING, PodGroupPhase.FINISHED),
        (2, 2, "Pending", None, PodGroupPhase.SCHEDULING),
    ],
    ids=[
        "running",
        "running-more-than-min",
        "failed",
        "finished",
        "pending-to-scheduling",
        "keeps-pending",
        "fewer-pods-than-min",
        "running-to-pending",
        "pending-to-finished",
        "no-phase-yet",
    ],
)
def test_the_phase_moves_as_scheduler_plugins_controller_moves_it(
    minimum: int, count: int, pod_phase: str, previous: PodGroupPhase | None, expected: PodGroupPhase
) -> None:
    assert settle(group(previous, minimum), pods(count, pod_phase)).phase is expected


def test_one_step_at_a_time_with_the_counts() -> None:
    first = next_upstream_status(group(None), pods(2))
    assert first == GroupStatus(PodGroupPhase.PENDING, upstream=True)  # "" → Pending, nothing else
    # Pending → Scheduling keeps the counts as they were; the next step counts.
    running = pods(1, "Running") + pods(1)
    step = next_upstream_status(group(), running)
    assert (step.phase, step.running) == (PodGroupPhase.SCHEDULING, 0)
    step = next_upstream_status(group(PodGroupPhase.SCHEDULING), [*pods(1, "Running"), *pods(2)[1:]])
    assert (step.phase, step.running, step.succeeded, step.failed) == (PodGroupPhase.SCHEDULING, 1, 0, 0)


def test_finished_and_failed_are_final() -> None:
    for final in (PodGroupPhase.FINISHED, PodGroupPhase.FAILED):
        assert next_upstream_status(group(final), []).phase is final


def test_occupied_by_names_the_owners_once_min_pods_exist() -> None:
    status = next_upstream_status(group(), pods(2, owner="train"))
    assert status.occupied_by == "ns/train"
    assert next_upstream_status(group(), pods(2)).occupied_by == ""
    assert next_upstream_status(group(), pods(1, owner="train")).occupied_by == ""  # still Pending


def test_what_is_written_has_no_scheduled_count_and_the_owners() -> None:
    status = next_upstream_status(group(), pods(2, owner="train"))
    assert status.to_dict() == {
        "phase": "Scheduling",
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "occupiedBy": "ns/train",
    }


def test_next_status_takes_each_groups_machine() -> None:
    koordinator = dataclasses.replace(group(), resource=names.POD_GROUPS)
    assert next_status(koordinator, pods(2), now=NOW).phase is PodGroupPhase.PRE_SCHEDULING
    assert next_status(group(), pods(2), now=NOW).phase is PodGroupPhase.SCHEDULING
