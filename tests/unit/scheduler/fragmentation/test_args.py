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
        "targetWorkload: give learn or shapes, not both",
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
        "w.plan: unknown field (allowed: learn, packingPlan, shapes)",
        "w.packingPlan: expected true or false, got 'yes'",
    ]
