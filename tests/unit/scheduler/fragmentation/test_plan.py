"""The packing plan: which shares of one GPU go together, and what going off it costs."""

from __future__ import annotations

import pytest

from scheduler import fragmentation
from scheduler.fragmentation import PackingPlan, TargetWorkload, TaskShape


def share(percent: int) -> TaskShape:
    return TaskShape(1000, 1 << 30, 1, percent)


#: Shares of 65, 47, 32 and 23 percent: 65 + 32 and 47 + 47 fill a GPU to 97 and 94; two 23s
#: beside a 47 to 93; 65 + 23 would leave 12 that nothing fits.
MIX = ((share(65), 10), (share(32), 10), (share(47), 20), (share(23), 20), (TaskShape(2000, 0, 1, 100), 50))


def test_the_plan_pairs_shares_that_fill_a_gpu() -> None:
    plan = PackingPlan.of(MIX)
    # 2,000 shares in the mix's proportions (333 of 65 and of 32, 667 of 47 and of 23), largest
    # first, each GPU completed as fully as what is left allows.
    assert plan.sets == {(32, 65): 333, (47, 47): 333, (23, 23, 47): 1, (23, 23, 23, 23): 166, (23,): 1}
    assert plan.on_plan(65, 32) and plan.on_plan(0, 65) and plan.on_plan(47, 47)
    assert plan.on_plan(47, 23) and plan.on_plan(70, 23) and plan.on_plan(46, 47)
    assert not plan.on_plan(65, 23)  # 12 left beside it: the 65 waits for a 32
    assert not plan.on_plan(32, 23)


def test_whole_gpus_and_cpu_only_shapes_are_not_planned() -> None:
    plan = PackingPlan.of(((TaskShape(2000, 0, 2, 100), 5), (TaskShape(2000, 0, 0, 0), 5)))
    assert plan.sets == {}
    assert plan.on_plan(50, 30)  # a share the plan does not know is never off it


def test_a_rare_share_still_gets_its_set() -> None:
    plan = PackingPlan.of(((share(81), 100_000), (share(16), 1)))
    assert (16, 81) in plan.sets
    assert plan.on_plan(81, 16) and plan.on_plan(16, 81) and not plan.on_plan(81, 81)


def test_leaving_the_plan_costs_what_a_free_gpu_would_on_top() -> None:
    workload = TargetWorkload(MIX, 1)
    plain = fragmentation.Demand(workload.gpu_shapes())
    planned = fragmentation.WorkloadIndex(workload, packing=True).demand
    free = (35, 100, 53)  # a GPU with 65 used, a free one, one with 47 used
    on_plan = ((0, 32),)
    off_plan = ((0, 23),)
    fresh = ((1, 23),)
    assert planned.loss(free, on_plan) == plain.loss(free, on_plan)
    assert planned.loss(free, off_plan) == plain.loss(free, off_plan) + plain.loss(free, fresh)
    # The 23 now goes beside the 47 (on the plan), not beside the 65 as the plain measure has it.
    assert plain.loss(free, off_plan) < plain.loss(free, ((2, 23),))
    assert planned.loss(free, ((2, 23),)) < planned.loss(free, off_plan)


@pytest.mark.parametrize("changes", [((0, 100),), ((0, 23), (2, 23)), ()], ids=["whole", "two-gpus", "nothing"])
def test_only_a_share_of_one_gpu_can_leave_the_plan(changes: tuple[tuple[int, int], ...]) -> None:
    workload = TargetWorkload(MIX, 1)
    plain = fragmentation.Demand(workload.gpu_shapes())
    planned = fragmentation.WorkloadIndex(workload, packing=True).demand
    assert planned.loss((100, 100, 100), changes) == plain.loss((100, 100, 100), changes)


def test_the_index_builds_a_plan_only_when_asked() -> None:
    workload = TargetWorkload(MIX, 1)
    assert fragmentation.WorkloadIndex(workload).plan is None
    index = fragmentation.WorkloadIndex(workload, packing=True)
    assert index.plan is not None
    # Every class of nodes measures against the same plan.
    node = fragmentation.NodeResources(8000, 8 << 30, "", (35, 100))
    assert index.table(node).demand.plan is index.plan


def test_a_plan_of_many_small_shares_is_built_over_sums_not_subsets() -> None:
    # 100 shares of 1% fill a GPU: its subsets are 2^100, its sums 101. A plan built over the
    # subsets would never finish (pytest's timeout ends the test); over the sums it is instant.
    plan = PackingPlan.of(((share(1), 1), (share(3), 1)))
    assert plan.on_plan(0, 1) and plan.on_plan(98, 1) and plan.on_plan(50, 3)
    assert not plan.on_plan(100, 1)
