"""The defragmentation strategy with canned plans: who gets a plan, what it creates, and that a
pending pod gets one plan at a time (descheduler.strategies.defrag)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from apis.extension import names
from descheduler.cluster import Cluster
from descheduler.metrics import Metrics
from descheduler.settings import DefragSettings
from descheduler.strategies.defrag import Defragmentation
from descheduler.strategies.planner import Migration, Plan, PlannerError
from kube.events import ObjectReference

NOW = datetime.datetime(2026, 1, 1, 0, 10, tzinfo=datetime.UTC)


class Canned:
    """A planner that answers `plan` (or raises `error`) and records what it was asked."""

    def __init__(self, plan: Plan, error: PlannerError | None = None) -> None:
        self.answer, self.error = plan, error
        self.asked: list[tuple[str, str, int, tuple[str, ...]]] = []

    def plan(self, namespace: str, name: str, *, max_migrations: int, exclude: Sequence[str]) -> Plan:
        self.asked.append((namespace, name, max_migrations, tuple(exclude)))
        if self.error is not None:
            raise self.error
        return self.answer


class Jobs:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def create(self, obj: dict[str, Any]) -> object:
        self.created.append(obj)
        return obj


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def normal(self, ref: ObjectReference, reason: str, message: str) -> None:
        self.seen.append((ref.name, reason, message))


def pending(name: str, gpus: str, *, since: str = "2026-01-01T00:00:00Z", uid: str = "") -> dict[str, Any]:
    whole = {names.NVIDIA_GPU: gpus}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": whole, "limits": whole}}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": since}
            ],
        },
    }


PLAN = Plan(True, "n1", (Migration("ns/a", "ua", "n1", "n2"), Migration("ns/b", "ub", "n1", "n3")), "frees n1")


def strategy(planner: Canned, **settings: Any) -> tuple[Defragmentation, Jobs, Events]:
    jobs, events = Jobs(), Events()
    d = Defragmentation(
        jobs,
        planner,
        DefragSettings(scheduler_address="x", **{"min_pending": 60.0, **settings}),
        metrics=Metrics(),
        events=events,
        now=lambda: NOW,
    )
    return d, jobs, events


def cluster(*pods: dict[str, Any], jobs: Sequence[dict[str, Any]] = ()) -> Cluster:
    c = Cluster()
    for p in pods:
        c.pods.upsert(f"ns/{p['metadata']['name']}", "1", p)
    for j in jobs:
        c.jobs.upsert(j["metadata"]["name"], "1", j)
    return c


def test_a_plan_becomes_one_job_per_move_with_its_reason_and_target() -> None:
    planner = Canned(PLAN)
    d, jobs, events = strategy(planner)
    d.run(cluster(pending("train", "8")))
    assert planner.asked == [("ns", "train", 4, ())]
    assert [j["spec"]["podRef"] for j in jobs.created] == [
        {"namespace": "ns", "name": "a", "uid": "ua"},
        {"namespace": "ns", "name": "b", "uid": "ub"},
    ]
    annotations = jobs.created[0]["metadata"]["annotations"]
    assert annotations[names.ANNOTATION_MIGRATION_TARGET_NODE] == "n2"
    assert "pending pod ns/train (8 whole GPUs) on n1" in annotations[names.ANNOTATION_MIGRATION_REASON]
    assert jobs.created[0]["metadata"]["labels"] == {names.LABEL_MIGRATION_FOR: "uid-train"}
    assert ("train", "Defragmenting", "moving ns/a (n1 → n2), ns/b (n1 → n3) so that it fits on n1") in events.seen


def test_pods_no_job_could_move_are_excluded_from_plans() -> None:
    planner = Canned(PLAN)
    d, _, _ = strategy(planner)
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "r1", "controller": True}
    placed = {"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    bare = {"metadata": {"name": "bare", "namespace": "ns"}, **placed}
    owned = {"metadata": {"name": "owned", "namespace": "ns", "ownerReferences": [rs]}, **placed}
    system = {"metadata": {"name": "dns", "namespace": "kube-system", "ownerReferences": [rs]}, **placed}
    c = cluster(pending("train", "8"), bare, owned)
    c.pods.upsert("kube-system/dns", "1", system)
    d.run(c)
    assert planner.asked[0][3] == ("kube-system/dns", "ns/bare")


def test_only_pods_pending_long_enough_for_whole_gpus_are_planned() -> None:
    planner = Canned(PLAN)
    d, _, _ = strategy(planner)
    d.run(cluster(pending("young", "8", since="2026-01-01T00:09:30Z"), pending("shares", "0"), pending("old", "2")))
    assert [name for _, name, _, _ in planner.asked] == ["old"]


def test_gang_members_are_not_planned_one_by_one() -> None:
    planner = Canned(PLAN)
    d, _, _ = strategy(planner)
    gang = pending("big-0", "4")
    gang["metadata"]["annotations"] = {names.ANNOTATION_GANG_NAME: "big", names.ANNOTATION_GANG_MIN_AVAILABLE: "4"}
    group = pending("pg-0", "4")
    group["metadata"]["labels"] = {names.LABEL_POD_GROUP: "pg"}
    upstream = pending("job-0", "4")
    upstream["metadata"]["labels"] = {names.LABEL_UPSTREAM_POD_GROUP: "job"}
    both = pending("both-0", "4")
    both["metadata"]["labels"] = {names.LABEL_UPSTREAM_POD_GROUP: "job", names.LABEL_POD_GROUP: "pg"}
    d.run(cluster(gang, group, upstream, both, pending("alone", "4")))
    assert [name for _, name, _, _ in planner.asked] == ["alone"]


def test_no_new_plan_while_its_jobs_run_or_just_after() -> None:
    planner = Canned(PLAN)
    d, _, _ = strategy(planner)
    running = {
        "metadata": {"name": "j", "labels": {names.LABEL_MIGRATION_FOR: "uid-train"}},
        "spec": {"podRef": {"namespace": "ns", "name": "a"}},
        "status": {"phase": "Running"},
    }
    d.run(cluster(pending("train", "8"), pending("other", "8"), jobs=[running]))
    assert [(name, exclude) for _, name, _, exclude in planner.asked] == [("other", ("ns/a",))]
    ended = {
        **running,
        "status": {
            "phase": "Succeeded",
            "conditions": [{"type": "x", "status": "True", "lastTransitionTime": "2026-01-01T00:09:50Z"}],
        },
    }
    planner.asked.clear()
    d.run(cluster(pending("train", "8"), jobs=[ended]))
    assert planner.asked == []  # ended 10 s ago: the scheduler gets its chance first
    long_ago = {
        **ended,
        "status": {
            "phase": "Succeeded",
            "conditions": [{"type": "x", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}],
        },
    }
    d.run(cluster(pending("train", "8"), jobs=[long_ago]))
    assert [name for _, name, _, _ in planner.asked] == ["train"]


def test_an_infeasible_plan_is_announced_once_and_a_planner_outage_creates_nothing() -> None:
    d, jobs, events = strategy(Canned(Plan(False, "", (), "no node can ever fit 16 GPUs")))
    for _ in range(3):
        d.run(cluster(pending("huge", "16")))
    assert jobs.created == []
    assert [e for e in events.seen if e[1] == "DefragmentationNotPossible"] == [
        ("huge", "DefragmentationNotPossible", "no node can ever fit 16 GPUs")
    ]
    down, jobs, _ = strategy(Canned(PLAN, PlannerError("UNAVAILABLE: connection refused")))
    down.run(cluster(pending("train", "8")))
    assert jobs.created == []


def test_due_once_per_interval() -> None:
    d, _, _ = strategy(Canned(PLAN), interval=10.0)
    assert [d.due(t) for t in (0.0, 5.0, 10.0, 19.0, 21.0)] == [True, False, True, False, True]
