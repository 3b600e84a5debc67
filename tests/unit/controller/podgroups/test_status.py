"""The PodGroup state machine, Koordinator's: from Pending to Finished or Failed."""

from __future__ import annotations

import dataclasses

import pytest

from apis.crds.podgroup import PodGroup, PodGroupPhase
from apis.k8s.core import Pod
from apis.k8s.meta import ObjectMeta
from controller.podgroups import next_status

NOW = "2026-01-02T03:04:05Z"


def group(phase: PodGroupPhase = PodGroupPhase.PENDING, minimum: int = 2, start: str = "") -> PodGroup:
    return PodGroup(ObjectMeta(name="pg", namespace="ns"), min_member=minimum, phase=phase, schedule_start_time=start)


def pod(name: str, node: str = "", phase: str = "Pending") -> Pod:
    return Pod(meta=ObjectMeta(name=name, namespace="ns"), node_name=node, phase=phase)


def test_pending_until_min_members_exist_then_pre_scheduling() -> None:
    assert next_status(group(), [pod("a")], now=NOW).phase is PodGroupPhase.PENDING
    assert next_status(group(), [pod("a"), pod("b")], now=NOW).phase is PodGroupPhase.PRE_SCHEDULING


def test_scheduling_sets_the_start_time_once_then_scheduled_and_running() -> None:
    started = next_status(group(PodGroupPhase.PRE_SCHEDULING), [pod("a", "n1"), pod("b")], now=NOW)
    assert (started.phase, started.scheduled, started.schedule_start_time) == (PodGroupPhase.SCHEDULING, 1, NOW)
    later = next_status(group(PodGroupPhase.SCHEDULING, start=NOW), [pod("a", "n1"), pod("b")], now="later")
    assert later.schedule_start_time == NOW
    bound = [pod("a", "n1"), pod("b", "n2")]
    assert next_status(group(PodGroupPhase.SCHEDULING), bound, now=NOW).phase is PodGroupPhase.SCHEDULED
    running = [dataclasses.replace(p, phase="Running") for p in bound]
    status = next_status(group(PodGroupPhase.SCHEDULED), running, now=NOW)
    assert (status.phase, status.running) == (PodGroupPhase.RUNNING, 2)


@pytest.mark.parametrize(
    ("phases", "expected"),
    [
        (("Succeeded", "Succeeded"), PodGroupPhase.FINISHED),
        (("Failed", "Running"), PodGroupPhase.FAILED),
        (("Failed", "Pending"), PodGroupPhase.SCHEDULED),
    ],
)
def test_final_phases(phases: tuple[str, str], expected: PodGroupPhase) -> None:
    pods = [pod(f"p{i}", "n1", phase) for i, phase in enumerate(phases)]
    assert next_status(group(PodGroupPhase.RUNNING), pods, now=NOW).phase is expected


def test_no_members_left_is_pending_again() -> None:
    assert next_status(group(PodGroupPhase.RUNNING), [], now=NOW).phase is PodGroupPhase.PENDING
