"""The fragmentation measure (FGD): hand-computed examples, and the fast loss of usable GPU
checked against F_n recomputed from its definition.

The worked example: a node with GPUs free 100/50/0 (T = 150) against the workload
A = one GPU at 30% (weight 2), B = one GPU at 60% (weight 1), C = two whole GPUs (weight 1),
D = CPU only (weight 1):

    F(A) = 0 (no GPU has less than 30 free but the empty one), F(B) = 50 (GPU 1), F(C) = 150
    (two idle GPUs needed, one there), F(D) = 150 (a task without GPU uses none)
    F_n = 2·0 + 50 + 150 + 150 = 350

A 40% share on GPU 0 (free 60/50/0): F_n' = 0 + 50 + 110 + 110 = 270; on GPU 1 (100/10/0):
F_n' = 2·10 + 10 + 110 + 110 = 250. With P = 5 and d = 40 the loss of usable GPU is
F_n' − F_n + P·d: 120 on GPU 0, 100 on GPU 1, so FGD puts the share on GPU 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import fragmentation
from scheduler.cache import ClusterCache, PodInfo
from scheduler.fragmentation import NodeResources, TargetWorkload, TaskShape
from scheduler.framework.interfaces import Handle

from ..conftest import make_pod

A = TaskShape(gpus=1, gpu_percent=30)
B = TaskShape(gpus=1, gpu_percent=60)
C = TaskShape(gpus=2, gpu_percent=100)
D = TaskShape(milli_cpu=1000)
WORKLOAD = TargetWorkload(((A, 2), (B, 1), (C, 1), (D, 1)), 1)
NODE = NodeResources(milli_cpu=64_000, memory=1 << 40, gpu_model="A100", gpu_free=(100, 50, 0))


def brute_loss(
    node: NodeResources, workload: TargetWorkload, cpu: int, memory: int, changes: Sequence[tuple[int, int]]
) -> int:
    """V_n − V_n′ from the definition: F_n′ − F_n + P·d, F recomputed shape by shape."""
    free = list(node.gpu_free)
    for index, take in changes:
        free[index] -= take
    after = NodeResources(node.milli_cpu - cpu, node.memory - memory, node.gpu_model, tuple(free))
    total_weight = sum(w for _, w in workload.shapes)
    taken = sum(take for _, take in changes)
    return (
        fragmentation.fragmentation(after, workload)
        - fragmentation.fragmentation(node, workload)
        + total_weight * taken
    )


def fast_loss(
    node: NodeResources, workload: TargetWorkload, cpu: int, memory: int, changes: Sequence[tuple[int, int]]
) -> int:
    return fragmentation.WorkloadIndex(workload).table(node).loss(cpu, memory, changes)


def test_fragmentation_of_the_worked_example() -> None:
    assert fragmentation.fragmentation(NODE, WORKLOAD) == 350


@pytest.mark.parametrize(
    ("changes", "expected"),
    [(((0, 40),), 120), (((1, 40),), 100), (((1, 50),), 100), (((0, 100),), 300), ((), 0)],
    ids=["40-on-empty-gpu", "40-on-half-gpu", "fills-half-gpu", "whole-gpu", "nothing"],
)
def test_loss_of_the_worked_example(changes: tuple[tuple[int, int], ...], expected: int) -> None:
    assert brute_loss(NODE, WORKLOAD, 0, 0, changes) == expected
    assert fast_loss(NODE, WORKLOAD, 0, 0, changes) == expected
    assert fragmentation.Demand(WORKLOAD.gpu_shapes()).loss(NODE.gpu_free, changes) == expected


def test_cpu_taken_makes_shapes_lose_everything_they_could_use() -> None:
    # A and B need 2 CPUs; a CPU-only pod leaving 1 CPU costs them all they could use:
    # A: 2 × 150, B: 1 × 100 (only GPU 0 has 60 free).
    workload = TargetWorkload(((TaskShape(2000, 0, 1, 30), 2), (TaskShape(2000, 0, 1, 60), 1)), 1)
    node = NodeResources(4000, 1 << 30, "A100", (100, 50, 0))
    assert brute_loss(node, workload, 3000, 0, ()) == 400
    assert fast_loss(node, workload, 3000, 0, ()) == 400
    # A share that also takes the CPU: GPU part and CPU part together, no double count.
    assert fast_loss(node, workload, 3000, 0, ((1, 40),)) == brute_loss(node, workload, 3000, 0, ((1, 40),)) == 400


def test_models_and_memory_limit_what_a_node_admits() -> None:
    other_model = TaskShape(gpus=1, gpu_percent=30, models=frozenset({"V100"}))
    big_memory = TaskShape(memory=2 << 30, gpus=1, gpu_percent=30)
    workload = TargetWorkload(((other_model, 1), (big_memory, 1), (A, 1)), 1)
    node = NodeResources(64_000, 1 << 30, "A100", (100, 50, 0))
    for changes in [((0, 40),), ((1, 40),), ((1, 50),)]:
        assert fast_loss(node, workload, 0, 0, changes) == brute_loss(node, workload, 0, 0, changes)


# --- the fast loss against the definition, on random nodes, workloads and pods ---------------------
MODELS = ["A100", "V100"]


@st.composite
def shapes(draw: st.DrawFn) -> TaskShape:
    gpus = draw(st.sampled_from([0, 1, 1, 1, 2, 4, 8]))
    percent = 0
    if gpus == 1:
        percent = draw(st.integers(1, 100))
    elif gpus > 1:
        percent = draw(st.sampled_from([100, 100, 40]))
    models = frozenset(draw(st.sets(st.sampled_from(MODELS), max_size=1)))
    return TaskShape(draw(st.integers(0, 8)) * 1000, draw(st.integers(0, 4)) << 30, gpus, percent, models)


@st.composite
def cases(draw: st.DrawFn) -> tuple[NodeResources, TargetWorkload, int, int, tuple[tuple[int, int], ...]]:
    free = tuple(
        draw(
            st.lists(st.sampled_from([0, 5, 10, 30, 50, 60, 70, 95, 100]) | st.integers(0, 100), min_size=1, max_size=8)
        )
    )
    node = NodeResources(
        draw(st.integers(0, 16)) * 1000, draw(st.integers(0, 8)) << 30, draw(st.sampled_from(MODELS)), free
    )
    weighted = draw(st.lists(st.tuples(shapes(), st.integers(1, 5)), min_size=1, max_size=8))
    workload = TargetWorkload(tuple(weighted), 1)
    cpu = draw(st.integers(0, node.milli_cpu // 1000)) * 1000
    memory = draw(st.integers(0, node.memory >> 30)) << 30
    kind = draw(st.sampled_from(["none", "share", "whole"]))
    changes: tuple[tuple[int, int], ...] = ()
    if kind == "share":
        index = draw(st.integers(0, len(free) - 1))
        if free[index]:
            changes = ((index, draw(st.integers(1, free[index]))),)
    elif kind == "whole":
        idle = [i for i, f in enumerate(free) if f == 100]
        changes = tuple((i, 100) for i in draw(st.lists(st.sampled_from(idle), unique=True))) if idle else ()
    return node, workload, cpu, memory, changes


@settings(max_examples=300)
@given(case=cases())
def test_fast_loss_equals_the_definition(
    case: tuple[NodeResources, TargetWorkload, int, int, tuple[tuple[int, int], ...]],
) -> None:
    node, workload, cpu, memory, changes = case
    assert fast_loss(node, workload, cpu, memory, changes) == brute_loss(node, workload, cpu, memory, changes)


# --- shapes of pods, arguments, learning ------------------------------------------------------------
def test_task_shape_of_pods() -> None:
    share = PodInfo.of(
        make_pod(
            cpu=4000, memory=8 << 30, gpu_core=30, gpu_ratio=30, node_selector={"node.koordinator.sh/gpu-model": "A100"}
        )
    )
    assert fragmentation.task_shape(share) == TaskShape(4000, 8 << 30, 1, 30, frozenset({"A100"}))
    whole = PodInfo.of(make_pod(cpu=1000, nvidia_gpu=2))
    assert fragmentation.task_shape(whole) == TaskShape(1000, 0, 2, 100)
    assert fragmentation.task_shape(PodInfo.of(make_pod(cpu=500))) == TaskShape(500)


def test_workload_of_counts_shapes_most_common_first() -> None:
    pods = [make_pod(f"p{i}", cpu=1000, gpu_core=50, gpu_ratio=50) for i in range(3)] + [make_pod("q", cpu=1000)]
    assert fragmentation.workload_of(PodInfo.of(p) for p in pods) == (
        (TaskShape(1000, 0, 1, 50), 3),
        (TaskShape(1000), 1),
    )


def test_shapes_round_trip_through_arguments() -> None:
    problems: list[str] = []
    shapes = ((TaskShape(3152, 5 << 30, 1, 81), 1047), (TaskShape(8000, 0, 8, 100, frozenset({"V100"})), 3))
    parsed = fragmentation.parse_workload_args(fragmentation.shapes_to_args(shapes), where="w", problems=problems)
    assert problems == []
    assert parsed.shapes == shapes


def test_bad_workload_arguments_are_all_reported() -> None:
    problems: list[str] = []
    raw = {"shapes": [{"gpus": 2, "gpuPercent": 50, "weight": 0, "colour": "red"}], "learn": {}}
    fragmentation.parse_workload_args(raw, where="targetWorkload", problems=problems)
    assert problems == [
        "targetWorkload: give learn or shapes, not both",
        "targetWorkload.shapes[0].colour: unknown field (allowed: cpu, gpuPercent, gpus, memory, models, weight)",
        "targetWorkload.shapes[0].weight: expected an integer in 1..1000000, got 0",
        "targetWorkload.shapes[0]: a shape of 2 GPUs must take whole GPUs (gpuPercent 100)",
    ]
    problems = []
    fragmentation.parse_workload_args({"learn": {"halfLife": -1}}, where="w", problems=problems)
    assert problems == ["w.learn.halfLife: expected a positive integer, got -1"]


def test_learner_follows_the_mix_and_counts_a_pod_once() -> None:
    learner = fragmentation.WorkloadLearner(fragmentation.WorkloadArgs())
    share, whole = TaskShape(gpus=1, gpu_percent=50), TaskShape(gpus=1, gpu_percent=100)
    for i in range(300):
        learner.observe(f"p{i}", share if i % 3 else whole)
        learner.observe("p0", whole)  # retried: counted once
    weights = dict(learner.current.shapes)
    assert set(weights) == {share, whole}
    assert abs(weights[share] - 2 * fragmentation.WEIGHT_SCALE // 3) < fragmentation.WEIGHT_SCALE // 50
    assert learner.index().workload is learner.current


def test_fixed_workload_is_not_learned() -> None:
    shapes = ((A, 1),)
    learner = fragmentation.WorkloadLearner(fragmentation.WorkloadArgs(shapes=shapes))
    assert learner.observe("p", B).shapes == shapes


def test_learner_is_shared_per_profile_and_arguments() -> None:
    handle = Handle(ClusterCache(), "tessera")
    args = fragmentation.WorkloadArgs()
    first = fragmentation.shared_learner(handle, args)
    assert fragmentation.shared_learner(handle, fragmentation.WorkloadArgs()) is first
    assert fragmentation.shared_learner(Handle(ClusterCache(), "tessera"), args) is not first
    assert fragmentation.shared_learner(handle, fragmentation.WorkloadArgs(shapes=((A, 1),))) is not first
