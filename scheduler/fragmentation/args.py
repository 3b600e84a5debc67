"""`targetWorkload` in a plugin's arguments: parsed and validated at start-up, and written back.

GPUFragmentation and DeviceShare both take it (`parse_workload_args`); `shapes_to_args` writes
a fixed workload as arguments, which is how `scheduler.core.with_fgd` hands the simulator's
and what-if's shape mix to both plugins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from apis.extension import names
from apis.k8s import resources
from scheduler.fragmentation.shapes import WEIGHT_SCALE, WHOLE_GPU, TaskShape

__all__ = ["LearnSettings", "WorkloadArgs", "parse_workload_args", "shapes_to_args"]


@dataclass(frozen=True, slots=True)
class LearnSettings:
    """How a workload is learned: a histogram of shapes, each observation weighing 2^(1/halfLife)
    times the one before (old pods fade), cut to the `max_shapes` heaviest (each set of
    accepted GPU models keeping its share of the weight), republished every
    `refresh_every` observations (at 1, 2, 4, 8, … while fewer were seen); configured shapes
    to start from count as `prior_pods` pods."""

    half_life: int = 10_000
    max_shapes: int = 64
    refresh_every: int = 1000
    #: With configured shapes to start from: how many pods they count as (they then fade like
    #: pods seen that long ago). Few: enough to place the first pods by, too few to hold a
    #: wrong prior against the pods that come (a prior without the model constraints of a mix
    #: where a third of the pods have one cost 1.1 points counted as 1,000 pods, none as 100).
    prior_pods: int = 100


@dataclass(frozen=True, slots=True)
class WorkloadArgs:
    """`targetWorkload` of a plugin's arguments: fixed `shapes`, or learned (`learn`, from
    nothing or from the `shapes` given with it); whether shares of one GPU follow the
    workload's packing plan (`fragmentation.plan`); and whether shapes that accept few GPUs
    weigh more (`fragmentation.supply`)."""

    shapes: tuple[tuple[TaskShape, int], ...] = ()
    learn: LearnSettings = LearnSettings()
    packing_plan: bool = True
    #: Whether a shape weighs its popularity per GPU it can use (`fragmentation.supply`).
    model_scarcity: bool = True
    #: Shapes and `learn` both given: learned, starting from the shapes (a prior) instead of
    #: from nothing.
    prior: bool = False

    @property
    def learned(self) -> bool:
        return not self.shapes or self.prior


_WORKLOAD_KEYS = frozenset({"learn", "modelScarcity", "packingPlan", "shapes"})
_LEARN_KEYS = {
    "halfLife": "half_life",
    "maxShapes": "max_shapes",
    "priorPods": "prior_pods",
    "refreshEvery": "refresh_every",
}
_SHAPE_KEYS = frozenset({"cpu", "memory", "gpus", "gpuPercent", "models", "weight"})


def parse_workload_args(raw: object, *, where: str, problems: list[str]) -> WorkloadArgs:
    """`{learn: {halfLife, maxShapes, refreshEvery, priorPods}}` (learned), `{shapes: [{cpu,
    memory, gpus, gpuPercent, models, weight}]}` (fixed) or both (learned, starting from the
    shapes), with `packingPlan` and `modelScarcity` (true or false, default true); absent:
    learned with the defaults. Appends to `problems`."""
    if raw is None:
        return WorkloadArgs()
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected a mapping with learn or shapes")
        return WorkloadArgs()
    allowed = ", ".join(sorted(_WORKLOAD_KEYS))
    problems += [f"{where}.{k}: unknown field (allowed: {allowed})" for k in raw if k not in _WORKLOAD_KEYS]
    packing = _flag(raw, "packingPlan", where, problems)
    scarcity = _flag(raw, "modelScarcity", where, problems)
    shapes = _parse_shapes(raw["shapes"], f"{where}.shapes", problems) if "shapes" in raw else ()
    if "learn" not in raw and shapes:
        return WorkloadArgs(shapes=shapes, packing_plan=packing, model_scarcity=scarcity)
    prior = bool(shapes)
    learn = raw.get("learn") or {}
    if not isinstance(learn, Mapping):
        problems.append(f"{where}.learn: expected a mapping")
        return WorkloadArgs(shapes, packing_plan=packing, model_scarcity=scarcity, prior=prior)
    values = {}
    for key, value in learn.items():
        field = _LEARN_KEYS.get(str(key))
        if field is None:
            problems.append(f"{where}.learn.{key}: unknown field (allowed: {', '.join(sorted(_LEARN_KEYS))})")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"{where}.learn.{key}: expected a positive integer, got {value!r}")
        else:
            values[field] = value
    return WorkloadArgs(shapes, LearnSettings(**values), packing_plan=packing, model_scarcity=scarcity, prior=prior)


def _flag(raw: Mapping[object, object], key: str, where: str, problems: list[str]) -> bool:
    """A boolean field of `targetWorkload`, true when absent."""
    value = raw.get(key, True)
    if not isinstance(value, bool):
        problems.append(f"{where}.{key}: expected true or false, got {value!r}")
        return True
    return value


def shapes_to_args(shapes: Iterable[tuple[TaskShape, int]]) -> dict[str, object]:
    """`targetWorkload` arguments naming these shapes: what `parse_workload_args` reads back."""
    return {
        "shapes": [
            {
                "cpu": f"{s.milli_cpu}m",
                "memory": str(s.memory),
                "gpus": s.gpus,
                "gpuPercent": s.gpu_percent,
                "models": sorted(s.models),
                "weight": w,
            }
            for s, w in shapes
        ]
    }


def _parse_shapes(raw: object, where: str, problems: list[str]) -> tuple[tuple[TaskShape, int], ...]:
    if not isinstance(raw, list) or not raw:
        problems.append(f"{where}: expected a non-empty list of shapes")
        return ()
    out = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{at}: expected a mapping")
            continue
        problems += [
            f"{at}.{k}: unknown field (allowed: {', '.join(sorted(_SHAPE_KEYS))})" for k in item if k not in _SHAPE_KEYS
        ]
        count = len(problems)
        cpu = _quantity(item.get("cpu", 0), names.CPU, f"{at}.cpu", problems)
        memory = _quantity(item.get("memory", 0), names.MEMORY, f"{at}.memory", problems)
        gpus = _int(item.get("gpus", 0), f"{at}.gpus", 0, 1 << 10, problems)
        percent = _int(item.get("gpuPercent", WHOLE_GPU if gpus else 0), f"{at}.gpuPercent", 0, WHOLE_GPU, problems)
        weight = _int(item.get("weight", 1), f"{at}.weight", 1, WEIGHT_SCALE, problems)
        models = item.get("models", [])
        if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
            problems.append(f"{at}.models: expected a list of GPU model names")
            models = []
        if gpus > 1 and 0 < percent < WHOLE_GPU:
            problems.append(f"{at}: a shape of {gpus} GPUs must take whole GPUs (gpuPercent 100)")
        if len(problems) == count:
            out.append((TaskShape(cpu, memory, gpus, percent, frozenset(models)), weight))
    return tuple(out)


def _quantity(raw: object, name: str, where: str, problems: list[str]) -> int:
    try:
        value = resources.to_int(name, raw if isinstance(raw, str) else str(raw))
    except ValueError as e:
        problems.append(f"{where}: {e}")
        return 0
    if value < 0:
        problems.append(f"{where}: must not be negative")
    return value


def _int(raw: object, where: str, low: int, high: int, problems: list[str]) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
        problems.append(f"{where}: expected an integer in {low}..{high}, got {raw!r}")
        return low
    return raw
