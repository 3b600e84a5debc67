"""Coscheduling on the offline core: all or nothing, Strict and NonStrict, groups, PodGroups,
match policies, the scheduling cycle, queue order and bad input."""

from __future__ import annotations

import pytest

from apis.crds.podgroup import PodGroup
from apis.extension import names
from apis.extension.gang import MatchPolicy
from apis.k8s.meta import ObjectMeta
from scheduler.cache import PodInfo
from scheduler.core import Scheduler
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from tests.support.builders import make_node, make_pod
from tests.support.scheduling import make_scheduler, state_of

from .gangs import FOREVER, member, nodes_of, plugin, schedule_all


def two_nodes() -> Scheduler:
    return make_scheduler(make_node("n1"), make_node("n2"))


def test_a_gang_that_fits_is_bound_whole_with_koordinators_annotations() -> None:
    scheduler = two_nodes()
    out = schedule_all(scheduler, [member(f"w-{i}") for i in range(4)])
    assert all(o.scheduled for o in out.values())
    for o in out.values():
        assert o.annotations[names.ANNOTATION_BIND_GANG_GROUP_ID] == "default/train"
        assert o.annotations[names.ANNOTATION_BIND_GANG_MEMBER_COUNT] == "4"
        assert o.annotations[names.DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID] == "default/train"
    summary = plugin(scheduler).gang_summary("default/train")
    assert summary is not None and summary.satisfied and summary.bound == 4


def test_members_wait_at_permit_until_min_are_waiting() -> None:
    scheduler = two_nodes()
    pods = [member(f"w-{i}", min_available=3) for i in range(3)]
    for pod in pods:
        scheduler.observe_pod(pod)
    assert scheduler.schedule_one(pods[0]).status.code is Code.WAIT
    assert scheduler.schedule_one(pods[1]).status.code is Code.WAIT
    assert scheduler.resolve_waiting() == []
    summary = plugin(scheduler).gang_summary("default/train")
    assert summary is not None
    assert summary.state == "gang default/train: 2 of 3 members waiting at Permit, 0 bound, min 3"
    assert scheduler.schedule_one(pods[2]).scheduled
    assert sorted(o.pod for o in scheduler.resolve_waiting() if o.scheduled) == ["default/w-0", "default/w-1"]


def test_a_strict_gang_too_big_stays_wholly_pending_and_gives_everything_back() -> None:
    scheduler = make_scheduler(make_node("n1"))
    before = state_of(scheduler.cache)
    out = schedule_all(scheduler, [member(f"w-{i}", min_available=3) for i in range(3)], now=FOREVER)
    assert nodes_of(out) == {"default/w-0": None, "default/w-1": None, "default/w-2": None}
    assert state_of(scheduler.cache) == before
    assert "gang default/train rejected: member default/w-2 unschedulable: 0/1 nodes are available" in (
        out["default/w-0"].status.message
    )
    summary = plugin(scheduler).gang_summary("default/train")
    assert summary is not None and not summary.satisfied and summary.waiting == 0
    assert summary.reason.startswith("member default/w-2 unschedulable: 0/1 nodes are available: 1 Insufficient")


def test_a_strict_gang_fails_its_cycle_and_turns_the_untried_members_away() -> None:
    scheduler = make_scheduler(make_node("n1"))
    pods = [member(f"w-{i}", min_available=4, gpus=3) for i in range(4)]
    out = schedule_all(scheduler, pods)
    # w-0 and w-1 fit (6 of 8 GPUs), w-2 does not: the gang's cycle fails and w-3 is not tried.
    assert out["default/w-2"].status.code is Code.UNSCHEDULABLE
    message = out["default/w-3"].status.message
    assert "gang default/train: rejected in scheduling cycle 1: member default/w-2 unschedulable" in message
    assert scheduler.cache.pod_node("uid-default-w-3") is None
    # Every member was tried: the next cycle is valid, and a member may be tried again.
    summary = plugin(scheduler).gang_summary("default/train")
    assert summary is not None and summary.cycle == 2 and summary.cycle_valid


def test_a_member_tried_twice_in_one_cycle_waits_for_the_others() -> None:
    scheduler = two_nodes()
    pods = [member(f"w-{i}", min_available=2) for i in range(2)]
    for pod in pods:
        scheduler.observe_pod(pod)
    scheduler.schedule_one(pods[0])
    scheduler.resolve_waiting(now=FOREVER)  # timed out, given back
    again = scheduler.schedule_one(pods[0])
    assert again.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert again.status.message.endswith("gang default/train: member already tried in scheduling cycle 1.")


def test_timeout_rejects_every_member_and_releases_their_devices() -> None:
    now = [0.0]
    scheduler, alone = (Scheduler(clock=lambda: now[0]) for _ in range(2))
    for node, device in (make_node("n1"),):
        for s in (scheduler, alone):
            s.cache.add_node(node)
            s.cache.add_device(device)
    pods = [member(f"w-{i}", min_available=3, gpus=2, waiting_time="30s") for i in range(3)]
    late = member("late", gang="other", min_available=1, gpus=1)
    scheduler.observe_pod(pods[2])  # created, never scheduled
    out = schedule_all(scheduler, [*pods[:2], late])
    assert out["default/w-0"].status.code is Code.WAIT
    assert out["default/late"].scheduled
    now[0] = 29.0
    assert scheduler.resolve_waiting() == []
    now[0] = 31.0
    decided = {o.pod: o for o in scheduler.resolve_waiting()}
    assert set(decided) == {"default/w-0", "default/w-1"}
    assert all(not o.scheduled for o in decided.values())
    assert "rejected due to timeout" in " ".join(o.status.message for o in decided.values())
    # What scheduling `late` alone leaves: the gang's devices are all back.
    schedule_all(alone, [late])
    held, alone_held = (
        [(u.holders != (), dict(u.used)) for u in s.cache.device_usage("n1")] for s in (scheduler, alone)
    )
    assert sorted(held, key=str) == sorted(alone_held, key=str)
    assert state_of(scheduler.cache)["n1"][:3] == state_of(alone.cache)["n1"][:3]


def test_non_strict_members_keep_waiting_when_one_fails() -> None:
    scheduler = make_scheduler(make_node("n1"))
    pods = [member(f"w-{i}", min_available=3, mode="NonStrict") for i in range(3)]
    out = schedule_all(scheduler, pods)
    assert out["default/w-0"].status.code is Code.WAIT
    assert out["default/w-1"].status.code is Code.WAIT
    assert out["default/w-2"].status.is_rejection
    assert "gang default/train: 2 of 3 members waiting at Permit, 0 bound, min 3" in out["default/w-2"].status.message
    assert scheduler.cycle.waiting == 2


def test_too_few_members_created_is_unresolvable_with_the_count() -> None:
    scheduler = two_nodes()
    out = schedule_all(scheduler, [member(f"w-{i}") for i in range(3)])
    status = out["default/w-0"].status
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "gang default/train: 3 of 4 members created, min 4" in status.message


def test_a_gang_group_across_namespaces_is_allowed_only_when_every_gang_is_complete() -> None:
    scheduler = two_nodes()
    groups = '["team-a/ps", "team-b/worker"]'
    ps = [member(f"ps-{i}", "ps", namespace="team-a", min_available=1, gpus=1, groups=groups) for i in range(1)]
    workers = [member(f"w-{i}", "worker", namespace="team-b", min_available=2, groups=groups) for i in range(2)]
    for pod in (*ps, *workers):
        scheduler.observe_pod(pod)
    # ps alone is complete, but its group is not: it waits.
    assert scheduler.schedule_one(ps[0]).status.code is Code.WAIT
    assert scheduler.schedule_one(workers[0]).status.code is Code.WAIT
    assert scheduler.schedule_one(workers[1]).scheduled
    decided = scheduler.resolve_waiting()
    assert sorted(o.pod for o in decided if o.scheduled) == ["team-a/ps-0", "team-b/w-0"]
    assert decided[0].annotations[names.ANNOTATION_BIND_GANG_GROUP_ID] == "team-a/ps,team-b/worker"
    assert decided[0].annotations[names.ANNOTATION_BIND_GANG_MEMBER_COUNT] == "3"


def test_a_gang_group_naming_a_gang_nobody_created_is_unresolvable() -> None:
    scheduler = two_nodes()
    out = schedule_all(scheduler, [member("ps-0", "ps", min_available=1, groups='["default/ps", "default/gone"]')])
    assert "gang default/ps: gang default/gone of its group has no members" in out["default/ps-0"].status.message


def pod_group(name: str, min_member: int, **annotations: str) -> PodGroup:
    return PodGroup(ObjectMeta(name=name, namespace="default", annotations=annotations), min_member=min_member)


def labelled(name: str, group: str) -> object:
    return make_pod(name, labels={names.LABEL_POD_GROUP: group}, koord_gpu=400)


def test_pod_group_gangs_wait_for_their_pod_group_then_use_its_min_member() -> None:
    scheduler = two_nodes()
    pods = [make_pod(f"w-{i}", labels={names.LABEL_POD_GROUP: "pg"}, koord_gpu=400) for i in range(2)]
    out = schedule_all(scheduler, pods)
    assert "gang default/pg: PodGroup default/pg not found" in out["default/w-0"].status.message
    assert out["default/w-0"].status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    scheduler.observe_pod_group(pod_group("pg", 2))
    out = schedule_all(scheduler, pods)
    assert all(o.scheduled for o in out.values())


def test_pod_group_timeout_is_its_schedule_timeout_seconds() -> None:
    scheduler = two_nodes()
    group = PodGroup(ObjectMeta(name="pg", namespace="default"), min_member=2, schedule_timeout_seconds=5)
    scheduler.observe_pod_group(group)
    pod = make_pod("w-0", labels={names.LABEL_POD_GROUP: "pg"}, koord_gpu=400)
    scheduler.observe_pod(pod)
    scheduler.observe_pod(make_pod("w-1", labels={names.LABEL_POD_GROUP: "pg"}, koord_gpu=400))
    status = scheduler.schedule_one(pod).status
    assert status.code is Code.WAIT and status.timeout == pytest.approx(5.0)


def test_waiting_and_running_counts_bound_members() -> None:
    scheduler = two_nodes()
    bound = [
        make_pod(
            f"w-{i}",
            node="n1",
            annotations={
                names.ANNOTATION_GANG_NAME: "train",
                names.ANNOTATION_GANG_MIN_AVAILABLE: "3",
                names.ANNOTATION_GANG_MATCH_POLICY: "waiting-and-running",
            },
        )
        for i in range(2)
    ]
    for pod in bound:
        scheduler.cache.add_pod(pod)
    new = member("w-2", min_available=3, match_policy="waiting-and-running")
    out = schedule_all(scheduler, [*bound, new])
    assert out["default/w-2"].scheduled


def test_only_waiting_ignores_bound_members() -> None:
    scheduler = two_nodes()
    bound = make_pod(
        "w-0",
        node="n1",
        annotations={
            names.ANNOTATION_GANG_NAME: "train",
            names.ANNOTATION_GANG_MIN_AVAILABLE: "2",
            names.ANNOTATION_GANG_MATCH_POLICY: "only-waiting",
        },
    )
    scheduler.cache.add_pod(bound)
    out = schedule_all(scheduler, [bound, member("w-1", min_available=2, match_policy="only-waiting")])
    assert out["default/w-1"].status.code is Code.WAIT


def test_once_satisfied_lets_later_members_through_without_waiting() -> None:
    scheduler = two_nodes()
    pods = [member(f"w-{i}", min_available=2, total_number="3") for i in range(3)]
    for pod in pods:
        scheduler.observe_pod(pod)
    scheduler.schedule_one(pods[0])
    assert scheduler.schedule_one(pods[1]).scheduled
    scheduler.resolve_waiting()
    assert scheduler.schedule_one(pods[2]).scheduled


def test_queue_order_keeps_a_gang_groups_members_together() -> None:
    scheduler = two_nodes()
    pods = [member("a-0", "a", min_available=2), make_pod("solo"), member("b-0", "b", min_available=2)]
    pods += [member("a-1", "a", min_available=2), member("b-1", "b", min_available=2)]
    for pod in pods:
        scheduler.observe_pod(pod)
    order = [pods[i].name for i in scheduler.queue_order(pods)]
    assert order == ["a-0", "a-1", "solo", "b-0", "b-1"]


@pytest.mark.parametrize(
    ("annotations", "problem", "check"),
    [
        ({"total_number": "2"}, "total-number '2' is not a number ≥ min 4", lambda s: s.total_number == 4),
        ({"mode": "Sloppy"}, "mode 'Sloppy' is not Strict or NonStrict", lambda s: s.mode == "Strict"),
        ({"waiting_time": "soon"}, "waiting-time 'soon' is not a duration ≥ 0", lambda s: True),
        ({"groups": "[not json"}, "groups '[not json' is not a JSON list", lambda s: True),
        (
            {"match_policy": "eventually"},
            "match-policy 'eventually' is not one of",
            lambda s: s.match_policy == MatchPolicy.ONCE_SATISFIED.value,
        ),
    ],
)
def test_bad_gang_values_fall_back_to_defaults_with_a_problem(
    annotations: dict[str, str], problem: str, check: object
) -> None:
    scheduler = two_nodes()
    out = schedule_all(scheduler, [member(f"w-{i}", **annotations) for i in range(4)])
    assert all(o.scheduled for o in out.values())
    summary = plugin(scheduler).gang_summary("default/train")
    assert summary is not None
    assert any(problem in p for p in summary.problems), summary.problems
    assert callable(check) and check(summary)


def test_an_unreadable_min_available_makes_the_gang_unschedulable_not_the_scheduler_crash() -> None:
    scheduler = two_nodes()
    out = schedule_all(scheduler, [member("w-0", min_available="many"), make_pod("solo")])
    status = out["default/w-0"].status
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "gang default/train: gang.scheduling.koordinator.sh/min-available 'many' is not an integer" in (
        status.message
    )
    assert out["default/solo"].scheduled


def test_a_deleted_member_no_longer_counts() -> None:
    scheduler = two_nodes()
    pods = [member(f"w-{i}", min_available=2) for i in range(2)]
    for pod in pods:
        scheduler.observe_pod(pod)
    for framework in scheduler.frameworks.values():
        framework.pod_deleted(pods[1])
    status = scheduler.schedule_one(pods[0]).status
    assert "gang default/train: 1 of 2 members created, min 2" in status.message


def test_an_explanation_changes_no_gang_bookkeeping() -> None:
    scheduler = two_nodes()
    pods = [member(f"w-{i}", min_available=2) for i in range(2)]
    for pod in pods:
        scheduler.observe_pod(pod)
    framework = next(iter(scheduler.frameworks.values()))
    probe = make_pod("probe", annotations=pods[0].annotations, koord_gpu=400)
    for pod in (pods[0], probe):
        _, status = framework.run_pre_filter(CycleState(dry_run=True), PodInfo.of(pod))
        assert status.is_success
    gang = plugin(scheduler).book.gangs["default/train"]
    assert gang.member_cycles == {} and len(gang.members) == 2


def test_bound_members_with_the_bind_annotations_mark_the_gang_satisfied_after_a_restart() -> None:
    scheduler = two_nodes()
    allowed = {names.ANNOTATION_BIND_GANG_GROUP_ID: "default/train", names.ANNOTATION_BIND_GANG_MEMBER_COUNT: "4"}
    bound = [make_pod(f"w-{i}", node="n1", annotations={**member("x").annotations, **allowed}) for i in range(2)]
    for pod in bound:
        scheduler.cache.add_pod(pod)
    out = schedule_all(scheduler, [*bound, member("w-2"), member("w-3")])
    assert out["default/w-2"].scheduled and out["default/w-3"].scheduled


def test_the_observer_hears_groups_allowed_with_their_wait_and_rejected_with_the_cause() -> None:
    now = [0.0]
    scheduler = Scheduler(clock=lambda: now[0])
    for node, device in (make_node("n1"),):
        scheduler.cache.add_node(node)
        scheduler.cache.add_device(device)
    coscheduling = plugin(scheduler)
    coscheduling._clock = lambda: now[0]
    allowed: list[tuple[str, float]] = []
    rejected: list[tuple[str, str]] = []

    class Observer:
        def allowed(self, group: str, seconds: float) -> None:
            allowed.append((group, seconds))

        def rejected(self, group: str, cause: str) -> None:
            rejected.append((group, cause))

    coscheduling.observer = Observer()
    fits = [member(f"a-{i}", "a", min_available=2, gpus=2) for i in range(2)]
    times_out = [member(f"b-{i}", "b", min_available=2, gpus=2, waiting_time="10s") for i in range(2)]
    for pod in (*fits, *times_out):
        scheduler.observe_pod(pod)
    scheduler.schedule_one(fits[0])
    now[0] = 1.5
    scheduler.schedule_one(fits[1])
    assert allowed == [("default/a", 1.5)]
    scheduler.schedule_one(times_out[0])
    now[0] = 20.0
    scheduler.resolve_waiting()
    assert rejected == [("default/b", "timeout")]


def test_the_lightweight_labels_make_a_gang_all_or_nothing() -> None:
    """scheduler-plugins' lightweight coscheduling labels (still read by Koordinator): a gang of 3
    named by label, of which two fit, binds nobody; a third member that fits completes it."""
    labels = {names.LABEL_LIGHTWEIGHT_GANG_NAME: "lw", names.LABEL_LIGHTWEIGHT_GANG_MIN_AVAILABLE: "3"}
    scheduler = make_scheduler(make_node("n1"))
    pods = [make_pod(f"w-{i}", labels=labels, koord_gpu=300) for i in range(3)]
    out = schedule_all(scheduler, pods, now=FOREVER)
    assert nodes_of(out) == {"default/w-0": None, "default/w-1": None, "default/w-2": None}
    summary = plugin(scheduler).gang_summary("default/lw")
    assert summary is not None and summary.min_available == 3 and not summary.satisfied
    small = [make_pod(f"s-{i}", labels={**labels, names.LABEL_LIGHTWEIGHT_GANG_NAME: "small"}) for i in range(3)]
    assert all(o.scheduled for o in schedule_all(scheduler, small).values())
