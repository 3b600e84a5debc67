"""`tessera simulate --defrag`: static fill to x = 100 on the trace, then one defragmentation pass.

Per seed (a process each, `--jobs` at once): the replay's fill up to arrived GPU demand
`--defrag-load` (default 100) percent of capacity with the chosen policy, then, from that cluster,
one pass per whole-GPU shape (`--defrag-shapes 8,4`): plan room for one more pod of the shape
with the planner the live scheduler serves, place it, repeat until no plan is found or
`--defrag-budget` migrations are spent (`scheduler.simulation.defrag`). Prints per seed and shape
the unallocated GPU % before and after, pods placed without and with migrations, migrations,
and time per plan; `-o json` the same as data.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.framework.config import SchedulerConfig
from scheduler.simulation import defrag, trace

__all__ = ["DefragSettings", "add_arguments", "parse_shapes", "report", "run_seeds"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--defrag",
        action="store_true",
        help="fill to --defrag-load, then one defragmentation pass per shape (see docs/scheduling.md)",
    )
    parser.add_argument(
        "--defrag-load", type=int, default=100, metavar="X", help="arrived GPU demand to fill to, %% (default 100)"
    )
    parser.add_argument(
        "--defrag-shapes", default="8,4", metavar="GPUS[,GPUS…]", help="whole-GPU shapes to make room for (8,4)"
    )
    parser.add_argument(
        "--defrag-budget", type=int, default=100, metavar="N", help="migrations per pass, at most (default 100)"
    )
    parser.add_argument(
        "--defrag-max-moves", type=int, default=8, metavar="N", help="migrations per plan, at most (default 8)"
    )


def parse_shapes(text: str) -> tuple[int, ...]:
    """`8,4` -> (8, 4). Raises ValueError for anything but positive integers."""
    shapes = tuple(int(part) for part in text.split(","))
    if not shapes or any(s < 1 for s in shapes):
        raise ValueError(f"--defrag-shapes: expected positive GPU counts, got {text!r}")
    return shapes


@dataclass(frozen=True, slots=True)
class DefragSettings:
    load: int
    shapes: tuple[int, ...]
    budget: int
    max_moves: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DefragSettings:
        """Raises ValueError naming a bad flag."""
        settings = cls(args.defrag_load, parse_shapes(args.defrag_shapes), args.defrag_budget, args.defrag_max_moves)
        for flag, value in (("--defrag-load", settings.load), ("--defrag-budget", settings.budget)):
            if value < 1:
                raise ValueError(f"{flag} must be at least 1, got {value}")
        if settings.max_moves < 1:
            raise ValueError(f"--defrag-max-moves must be at least 1, got {settings.max_moves}")
        return settings


def _one(
    nodes: Sequence[trace.TraceNode],
    pods: Sequence[trace.TracePod],
    seed: int,
    config: SchedulerConfig,
    settings: DefragSettings,
) -> defrag.DefragSeed:
    return defrag.run_defrag(
        nodes,
        pods,
        seed=seed,
        config=config,
        shapes=settings.shapes,
        budget=settings.budget,
        max_migrations=settings.max_moves,
        load=settings.load,
    )


def run_seeds(
    nodes: Sequence[trace.TraceNode],
    pods: Sequence[trace.TracePod],
    seeds: Sequence[int],
    config: SchedulerConfig,
    settings: DefragSettings,
    *,
    jobs: int,
) -> list[defrag.DefragSeed]:
    """Every seed, `jobs` processes at once (in this one when 1), in seed order."""
    if jobs <= 1:
        return [_one(nodes, pods, seed, config, settings) for seed in seeds]
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_one, nodes, pods, seed, config, settings) for seed in seeds]
        return [f.result() for f in futures]


def report(results: Sequence[defrag.DefragSeed], settings: DefragSettings, *, output: str) -> str:
    """The table (one row per seed and shape, then the means) or the JSON document."""
    if output == "json":
        doc = {
            "load": settings.load,
            "budget": settings.budget,
            "max_moves_per_plan": settings.max_moves,
            "seeds": [r.to_dict() for r in results],
        }
        return json.dumps(doc, indent=2)
    head = ["seed", "GPUs", "unalloc before", "after", "placed free", "placed moved", "migrations", "ms/plan (max)"]
    rows = [head]
    for r in results:
        for p in r.passes:
            d = p.to_dict()
            rows.append(
                [
                    str(r.seed),
                    str(p.gpus),
                    f"{r.unallocated_before:.2f}",
                    f"{p.unallocated_after:.2f}",
                    str(p.placed_free),
                    str(p.placed_moved),
                    str(p.migrations),
                    f"{d['plan_ms_mean']} ({d['plan_ms_max']})",
                ]
            )
    for gpus in settings.shapes:
        passes = [(r, p) for r in results for p in r.passes if p.gpus == gpus]
        if len(passes) > 1:
            rows.append(
                [
                    "mean",
                    str(gpus),
                    f"{statistics.fmean(r.unallocated_before for r, _ in passes):.2f}",
                    f"{statistics.fmean(p.unallocated_after for _, p in passes):.2f}",
                    f"{statistics.fmean(p.placed_free for _, p in passes):.1f}",
                    f"{statistics.fmean(p.placed_moved for _, p in passes):.1f}",
                    f"{statistics.fmean(p.migrations for _, p in passes):.1f}",
                    "",
                ]
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    stops = [f"seed {r.seed}, {p.gpus} GPUs: stopped: {p.stop}" for r in results for p in r.passes]
    return "\n".join([*lines, "", *stops])
