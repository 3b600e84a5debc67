"""The defragmentation planner on small hand-made clusters (4-GPU nodes, a 2-GPU spare).

Each case builds the cluster through the same cache and Scheduler the simulator uses, plans for
a pending 4-GPU pod, and checks the plan — and that the cache then holds what the plan says."""

from __future__ import annotations

import dataclasses

import pytest

from apis.k8s.core import Pod
from scheduler.core import Scheduler
from scheduler.defrag import MigrationPlan, PlanOptions, plan
from tests.support.builders import bound_pod, controlled, gpu_alloc, make_node, make_pod
from tests.support.scheduling import make_scheduler

CORES = 4000


def small(name: str, node: str, gpu: int, percent: int, *, owned: bool = True, **extra: object) -> Pod:
    pod = bound_pod(name, node, gpu_alloc(gpu, percent), cpu=1000, gpu_core=percent, gpu_ratio=percent)
    if extra:
        pod = dataclasses.replace(pod, **extra)  # type: ignore[arg-type]  # Pod fields, by the caller
    return controlled(pod) if owned else pod


def cluster(*pods: Pod, spare: bool = True) -> Scheduler:
    nodes = [make_node("node-a", gpus=4), make_node("node-b", gpus=4)]
    if spare:
        nodes.append(make_node("node-s", gpus=2))
    scheduler = make_scheduler(*nodes)
    for pod in pods:
        scheduler.cache.add_pod(pod)
    return scheduler


def pending(gpus: int = 4) -> Pod:
    return make_pod("train", cpu=CORES, nvidia_gpu=gpus)


def placement(scheduler: Scheduler) -> dict[str, str]:
    return {info.key: info.pod.node_name for info in scheduler.cache.pods()}


def moved(result: MigrationPlan) -> set[str]:
    return {m.pod for m in result.migrations}


# node-a: 2 small pods (GPUs 0 and 1); node-b: 3 (GPUs 0, 1 and 2). The spare takes fractions.
TWO_ON_A = (small("a0", "node-a", 0, 30), small("a1", "node-a", 1, 30))
THREE_ON_B = (small("b0", "node-b", 0, 20), small("b1", "node-b", 1, 20), small("b2", "node-b", 2, 20))


def test_the_node_with_the_fewest_moves_is_freed_and_the_pod_then_fits_there() -> None:
    scheduler = cluster(*TWO_ON_A, *THREE_ON_B)
    result = plan(scheduler, pending())
    assert result.feasible, result.message
    assert result.node == "node-a"
    assert moved(result) == {"default/a0", "default/a1"}
    assert all(m.from_node == "node-a" and m.to_node != "node-a" for m in result.migrations)
    assert result.freed_gpus == 4
    assert "fits on node-a after 2 migrations" in result.message
    # The cache holds the plan done: the replacements where the plan says, node-a empty.
    where = placement(scheduler)
    assert sorted(where[m.pod] for m in result.migrations) == sorted(m.to_node for m in result.migrations)
    assert scheduler.schedule_one(pending()).node == "node-a"


def test_a_victim_with_nowhere_else_to_go_is_not_chosen() -> None:
    # a0 and a1 may run on node-a only: node-b's three pods move instead.
    only_a = {"kubernetes.io/hostname": "node-a"}
    pinned = [small(p.name, "node-a", i, 30, node_selector=only_a) for i, p in enumerate(TWO_ON_A)]
    scheduler = cluster(*pinned, *THREE_ON_B)
    result = plan(scheduler, pending())
    assert result.feasible, result.message
    assert result.node == "node-b"
    assert moved(result) == {"default/b0", "default/b1", "default/b2"}


@pytest.mark.parametrize(
    ("a_pods", "options"),
    [
        ((small("a0", "node-a", 0, 30, owned=False), small("a1", "node-a", 1, 30)), PlanOptions()),
        (TWO_ON_A, PlanOptions(exclude=frozenset({"default/a1"}))),
        ((small("a0", "node-a", 0, 30, priority=100), small("a1", "node-a", 1, 30)), PlanOptions()),
    ],
    ids=["uncontrolled", "excluded", "higher-priority"],
)
def test_pods_that_may_not_move_are_never_chosen(a_pods: tuple[Pod, ...], options: PlanOptions) -> None:
    scheduler = cluster(*a_pods, *THREE_ON_B)
    result = plan(scheduler, pending(), options)
    assert result.feasible, result.message
    assert result.node == "node-b"
    assert not moved(result) & {"default/a0", "default/a1"}


def test_a_pod_that_fits_already_needs_no_migrations() -> None:
    scheduler = cluster(*TWO_ON_A)
    result = plan(scheduler, pending())
    assert result.feasible and result.node == "node-b" and not result.migrations
    assert "nothing to move" in result.message


def test_no_plan_says_why_and_leaves_the_cache_as_it_was() -> None:
    pods = [small(p.name, p.node_name, i, 30, owned=False) for i, p in enumerate(TWO_ON_A)]
    pods += [small(p.name, p.node_name, i, 20, owned=False) for i, p in enumerate(THREE_ON_B)]
    scheduler = cluster(*pods)
    before = placement(scheduler)
    result = plan(scheduler, pending())
    assert not result.feasible and result.node is None and not result.migrations
    assert result.message.startswith("no plan of at most 4 migrations makes room for pod default/train")
    assert "pods that may not move hold the GPUs" in result.message
    assert "5 no controller recreates it" in result.message
    assert placement(scheduler) == before


def test_the_migration_budget_is_kept() -> None:
    scheduler = cluster(*TWO_ON_A, *THREE_ON_B)
    result = plan(scheduler, pending(), PlanOptions(max_migrations=1))
    assert not result.feasible
    assert "needs more migrations than allowed" in result.message


def test_moves_with_no_room_elsewhere_give_no_plan() -> None:
    # Without the spare, node-a's pods have only node-b's free GPU 3 and node-b's only node-a's:
    # 30% + 30% fit on node-b; so node-a is freed — unless node-b is full.
    full_b = [small(f"b{i}", "node-b", i, 90) for i in range(4)]
    scheduler = cluster(*TWO_ON_A, *full_b, spare=False)
    result = plan(scheduler, pending())
    assert not result.feasible
    assert "has nowhere else to go" in result.message


def test_a_pod_the_scheduler_rejects_outright_gets_that_reason() -> None:
    scheduler = cluster(*TWO_ON_A)
    bad = make_pod("bad", gpu_core=150)
    result = plan(scheduler, bad)
    assert not result.feasible
    assert "cannot be helped by moving pods" in result.message
