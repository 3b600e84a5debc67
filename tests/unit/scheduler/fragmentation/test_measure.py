"""The fragmentation measure (FGD): the worked example of `conftest.py` computed by hand, and
the fast loss of usable GPU checked against F_n recomputed from its definition."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import fragmentation
from scheduler.fragmentation import Balance, NodeResources, TargetWorkload, TaskShape
from tests.unit.scheduler.fragmentation.shapes import NODE, WORKLOAD, A


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


def test_balance_counts_the_gpu_cpu_and_memory_cannot_feed() -> None:
    # GPU shapes ask 2 CPUs per 50% (weight 2) and 8 CPUs per whole GPU: 12 CPUs and 3 GiB per
    # 200% of GPU, i.e. 60 milli-CPU and 16 MiB per percent. CPU-only shapes do not count.
    balance = Balance.of(
        [
            (TaskShape(milli_cpu=2000, memory=1 << 30, gpus=1, gpu_percent=50), 2),
            (TaskShape(milli_cpu=8000, memory=1 << 30, gpus=1, gpu_percent=100), 1),
            (TaskShape(milli_cpu=64_000), 5),
        ]
    )
    assert balance == Balance(gpu=200, milli_cpu=12_000, memory=3 << 30)
    assert balance.stranded(400, 24_000, 1 << 40) == 0  # 24 CPUs feed exactly 400%
    assert balance.stranded(400, 12_000, 1 << 40) == 200
    assert balance.stranded(400, 1 << 40, 3 << 30) == 200  # memory feeds 200%
    assert balance.stranded(400, -1000, 1 << 40) == 400  # over-committed CPU feeds nothing
    assert Balance.of([(TaskShape(milli_cpu=1000), 1)]).stranded(300, 0, 0) == 0  # no GPU shapes
