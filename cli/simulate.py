"""`tessera simulate`: replay the Alibaba GPU trace through the scheduling core.

Follows the trace's published protocol (see `scheduler.simulation.replay`) and reports the
unallocated GPU share when demand reaches the cluster's capacity, for comparison with the
paper's baselines (Random 13.70 … BestFit 7.14, FGD 4.77 on the default trace). Seeds run in
parallel processes (`--jobs`); each is deterministic.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import time
from pathlib import Path

from apis.errors import ConfigError, ValidationError
from scheduler.core import FGD, FGD_CHOICES, SCORING_CHOICES, with_percentage_of_nodes_to_score, with_scoring_choice
from scheduler.framework.config import SchedulerConfig, load_config
from scheduler.framework.scoring import ScoringStrategyType
from scheduler.simulation import replay, trace

NODES_FILE = "openb_node_list_gpu_node.csv"
_TRACE_DIR = Path("shared") / "data" / "alibaba-gpu-2023"


def default_data() -> Path:
    """`../shared/data/alibaba-gpu-2023` from the repo root; from a git worktree nested deeper,
    the nearest such folder above it."""
    repo = Path(__file__).resolve().parents[1]
    for parent in repo.parents:
        if (parent / _TRACE_DIR).is_dir():
            return parent / _TRACE_DIR
    return repo.parent / _TRACE_DIR


DEFAULT_DATA = default_data()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"trace folder (default {DEFAULT_DATA})")
    parser.add_argument("--nodes", type=Path, help=f"node list CSV (default DATA/{NODES_FILE})")
    parser.add_argument(
        "--trace", default="default", help="pod list to use: DATA/openb_pod_list_TRACE.csv (default: default)"
    )
    parser.add_argument("--pods", type=Path, help="pod list CSV (overrides --trace)")
    parser.add_argument(
        "--scoring",
        choices=SCORING_CHOICES,
        default=ScoringStrategyType.LEAST_ALLOCATED.value,
        help=f"scoring strategy of NodeResourcesFit and DeviceShare, or {FGD}: fragmentation gradient descent "
        "against the trace's own mix of task shapes",
    )
    parser.add_argument("--seeds", default="1-10", help="seeds: 1-10, or 1,3,5 (default 1-10)")
    parser.add_argument("--jobs", type=int, default=0, help="parallel processes (default: one per CPU)")
    parser.add_argument(
        "--percentage-of-nodes-to-score",
        type=int,
        default=100,
        help="as kube-scheduler; 100 (default) scores every feasible node, like the paper's baselines",
    )
    parser.add_argument("--config", type=Path, help="scheduler configuration (YAML)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")


def parse_seeds(text: str) -> list[int]:
    """`1-10`, `1,3,5`, `7`. Raises ValueError."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        seeds += range(int(low), int(high) + 1) if high else [int(low)]
    if not seeds:
        raise ValueError("no seeds")
    return seeds


def run(args: argparse.Namespace) -> int:
    try:
        seeds = parse_seeds(args.seeds)
        nodes_path = args.nodes or args.data / NODES_FILE
        pods_path = args.pods or args.data / f"openb_pod_list_{args.trace}.csv"
        with nodes_path.open(encoding="utf-8") as f:
            nodes = trace.parse_nodes(f, source=str(nodes_path))
        with pods_path.open(encoding="utf-8") as f:
            pods = trace.parse_pods(f, source=str(pods_path))
        config = load_config(args.config.read_text(encoding="utf-8")) if args.config else SchedulerConfig()
        workload = trace.workload(pods) if args.scoring in FGD_CHOICES else ()
        config = with_scoring_choice(config, args.scoring, workload)
        config = with_percentage_of_nodes_to_score(config, args.percentage_of_nodes_to_score)
    except (OSError, ValueError, ValidationError, ConfigError) as e:
        print(f"tessera simulate: {e}", file=sys.stderr)
        return 1
    started = time.monotonic()
    jobs = args.jobs or min(len(seeds), os.cpu_count() or 1)
    results = _run_seeds(nodes, pods, seeds, config, jobs, show_progress=sys.stderr.isatty())
    wall = time.monotonic() - started
    summary = replay.summarize(results)
    doc = {
        "nodes": str(nodes_path),
        "pods": str(pods_path),
        "gpus": sum(n.gpus for n in nodes),
        "scoring": args.scoring,
        "percentage_of_nodes_to_score": args.percentage_of_nodes_to_score,
        "seeds": seeds,
        "unallocated_gpu_pct_at_100": {
            "mean": round(summary.unallocated_at_100[0], 3),
            "sd": round(summary.unallocated_at_100[1], 3),
        },
        "per_seed": [
            {
                "seed": r.seed,
                "unallocated_gpu_pct_at_100": _round(r.unallocated(100)),
                "pods_tried": r.pods_tried,
                "pods_scheduled": r.pods_scheduled,
            }
            for r in results
        ],
        "curve": {str(x): round(v, 3) for x, v in summary.curve.items()},
        "wall_seconds": round(wall, 1),
    }
    if args.output == "json":
        print(json.dumps(doc, indent=2))
    else:
        mean, sd = summary.unallocated_at_100
        print(f"trace {pods_path.name} on {doc['gpus']} GPUs, {args.scoring}, seeds {args.seeds}")
        print(f"unallocated GPU at 100% demand: {mean:.2f}% (sd {sd:.2f}) in {wall:.0f}s")
        for x in (50, 60, 70, 80, 90, 100, 110, 120, 130):
            if x in summary.curve:
                print(f"  x={x:3d}: {summary.curve[x]:6.2f}% unallocated")
    return 0


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _run_seeds(
    nodes: list[trace.TraceNode],
    pods: list[trace.TracePod],
    seeds: list[int],
    config: SchedulerConfig,
    jobs: int,
    *,
    show_progress: bool,
) -> list[replay.SeedResult]:
    if jobs <= 1:
        out = []
        for seed in seeds:

            def progress(done: int, total: int, seed: int = seed) -> None:
                if show_progress:
                    print(f"\rseed {seed}: {done}/{total} pods", end="", file=sys.stderr, flush=True)

            out.append(replay.replay(nodes, pods, seed=seed, config=config, progress=progress))
            _report(out[-1], show_progress)
        return out
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(replay.replay, nodes, pods, seed=seed, config=config): seed for seed in seeds}
        done: dict[int, replay.SeedResult] = {}
        for future in concurrent.futures.as_completed(futures):
            result = future.result()
            done[result.seed] = result
            _report(result, show_progress)
    return [done[seed] for seed in seeds]


def _report(result: replay.SeedResult, show_progress: bool) -> None:
    if show_progress:
        value = result.unallocated(100)
        shown = f"{value:.2f}%" if value is not None else "n/a"
        print(f"\rseed {result.seed}: {shown} unallocated at x=100" + " " * 20, file=sys.stderr, flush=True)
