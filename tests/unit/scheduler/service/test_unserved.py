"""Pods naming a scheduler no profile serves: one Event each, after the grace, by the leader."""

from __future__ import annotations

from dataclasses import dataclass, field

from kube.events import ObjectReference
from scheduler.service.unserved import REASON_NOT_SERVED, UnservedNames
from tests.support.clocks import FakeClock


@dataclass
class Recorder:
    seen: list[tuple[str, str, str]] = field(default_factory=list)

    def warning(self, ref: ObjectReference, reason: str, message: str) -> None:
        self.seen.append((ref.name, reason, message))


def names(recorder: Recorder, clock: FakeClock, *, leader: list[bool] | None = None) -> UnservedNames:
    lead = leader if leader is not None else [True]
    return UnservedNames(
        recorder,  # type: ignore[arg-type]  # records warnings only
        ("tessera-scheduler", "koord-scheduler"),
        component="tessera-scheduler",
        grace=30,
        is_leader=lambda: lead[0],
        clock=clock,
    )


def ref(name: str) -> ObjectReference:
    return ObjectReference("Pod", name, "ns", f"uid-{name}", "v1")


def test_a_pod_still_waiting_after_the_grace_is_told_once_with_the_names_served() -> None:
    recorder, clock = Recorder(), FakeClock(100.0)
    unserved = names(recorder, clock)
    unserved.waiting("uid-a", ref("a"), "koord-schedulr")
    clock.now += 29
    assert unserved.tell_due() == 0
    unserved.waiting("uid-a", ref("a"), "koord-schedulr")  # seen again (an update): still the first time
    clock.now += 1
    assert unserved.tell_due() == 1
    assert recorder.seen == [
        (
            "a",
            REASON_NOT_SERVED,
            "no profile of tessera-scheduler serves schedulerName 'koord-schedulr' "
            "(it serves koord-scheduler, tessera-scheduler); another scheduler may serve it",
        )
    ]
    unserved.waiting("uid-a", ref("a"), "koord-schedulr")
    clock.now += 100
    assert unserved.tell_due() == 0  # once per pod


def test_a_pod_another_scheduler_binds_in_time_is_never_told() -> None:
    recorder, clock = Recorder(), FakeClock(100.0)
    unserved = names(recorder, clock)
    unserved.waiting("uid-b", ref("b"), "default-scheduler")
    clock.now += 5
    unserved.forget("uid-b")  # kube-scheduler bound it
    clock.now += 60
    assert unserved.tell_due() == 0 and recorder.seen == []


def test_only_the_leader_tells() -> None:
    recorder, clock, leader = Recorder(), FakeClock(100.0), [False]
    unserved = names(recorder, clock, leader=leader)
    unserved.waiting("uid-c", ref("c"), "other")
    clock.now += 60
    assert unserved.tell_due() == 0
    leader[0] = True
    assert unserved.tell_due() == 1 and recorder.seen[0][0] == "c"
