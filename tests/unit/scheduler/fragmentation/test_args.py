"""`targetWorkload` arguments: written and read back, and every problem reported at once."""

from __future__ import annotations

from scheduler import fragmentation
from scheduler.fragmentation import TaskShape


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
        "targetWorkload.shapes[0].colour: unknown field (allowed: cpu, gpuPercent, gpus, memory, models, weight)",
        "targetWorkload.shapes[0].weight: expected an integer in 1..1000000, got 0",
        "targetWorkload.shapes[0]: a shape of 2 GPUs must take whole GPUs (gpuPercent 100)",
    ]
    problems = []
    fragmentation.parse_workload_args({"learn": {"halfLife": -1}}, where="w", problems=problems)
    assert problems == ["w.learn.halfLife: expected a positive integer, got -1"]


def test_the_packing_plan_is_on_unless_turned_off() -> None:
    problems: list[str] = []
    assert fragmentation.parse_workload_args(None, where="w", problems=problems).packing_plan
    off = fragmentation.parse_workload_args({"packingPlan": False}, where="w", problems=problems)
    assert (off.packing_plan, off.learned) == (False, True)
    fixed = fragmentation.parse_workload_args(
        {"packingPlan": False, "shapes": [{"gpus": 1, "gpuPercent": 50}]}, where="w", problems=problems
    )
    assert (fixed.packing_plan, fixed.shapes) == (False, ((TaskShape(0, 0, 1, 50), 1),))
    assert problems == []
    fragmentation.parse_workload_args({"packingPlan": "yes", "plan": 1}, where="w", problems=problems)
    assert problems == [
        "w.plan: unknown field (allowed: learn, modelScarcity, packingPlan, shapes)",
        "w.packingPlan: expected true or false, got 'yes'",
    ]


def test_model_scarcity_is_on_unless_turned_off() -> None:
    problems: list[str] = []
    assert fragmentation.parse_workload_args(None, where="w", problems=problems).model_scarcity
    assert not fragmentation.parse_workload_args({"modelScarcity": False}, where="w", problems=problems).model_scarcity
    fragmentation.parse_workload_args({"modelScarcity": 1}, where="w", problems=problems)
    assert problems == ["w.modelScarcity: expected true or false, got 1"]


def test_shapes_with_learn_are_where_learning_starts() -> None:
    problems: list[str] = []
    raw = {"shapes": [{"gpus": 1, "gpuPercent": 50, "weight": 3}], "learn": {"priorPods": 200}}
    parsed = fragmentation.parse_workload_args(raw, where="w", problems=problems)
    assert problems == []
    assert (parsed.learned, parsed.prior, parsed.learn.prior_pods) == (True, True, 200)
    assert parsed.shapes == ((TaskShape(0, 0, 1, 50), 3),)
    fixed = fragmentation.parse_workload_args({"shapes": raw["shapes"]}, where="w", problems=problems)
    assert (fixed.learned, fixed.prior) == (False, False)
