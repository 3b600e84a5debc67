"""`tessera simulate`: replay the Alibaba GPU trace through the scheduling core.

Follows the trace's published protocol (see `scheduler.simulation.replay`) and reports the
unallocated GPU share when demand reaches the cluster's capacity, for comparison with the
paper's baselines (`scheduler.simulation.published`; Random 13.70 … BestFit 7.14, FGD 4.77 on
the default trace). `--scoring A,B,C` runs several policies side by side; every (policy, seed)
run is a process of its own (`--jobs` at once) and deterministic. A progress bar shows on a
terminal only; `--plot out.png` draws the curves (matplotlib, an optional extra). `--defrag`
measures defragmentation instead: fill to x = 100, then one pass of the planner
(`cli.simulate_defrag`). `--claims-fraction 0.3` runs each policy twice on the same pods: as
the trace asks (Koordinator's protocol), and with about 30 % of the GPU pods asking through
ResourceClaims (the row `POLICY+claims`), to compare the DRA path's packing with DeviceShare's.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from apis.errors import ConfigError, ValidationError
from cli import simulate_defrag, simulate_mix, simulate_plot
from cli.progress import ProgressBar
from scheduler.core import (
    BALANCED_FGD,
    FGD,
    FGD_CHOICES,
    SCORING_CHOICES,
    with_percentage_of_nodes_to_score,
    with_scoring_choice,
)
from scheduler.framework.config import SchedulerConfig, load_config
from scheduler.simulation import mixes, published, replay, trace

NODES_FILE = "openb_node_list_gpu_node.csv"
#: The row of a policy run with some pods asking through ResourceClaims.
CLAIMS_SUFFIX = "+claims"
#: `--workload`: the trace's mix (fixed), learned from nothing, learned from the trace's mix.
WORKLOADS = ("trace", "learned", "prior")
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
        default=BALANCED_FGD,
        metavar="POLICY[,POLICY…]",
        help=f"placement policies to compare, comma-separated, of {', '.join(SCORING_CHOICES)}: the scoring "
        f"strategy of NodeResourcesFit and DeviceShare, {FGD} (fragmentation gradient descent) or {BALANCED_FGD} "
        "(FGD plus CPU/memory balance, the scheduler's default), both against the trace's own mix of task shapes "
        f"(default {BALANCED_FGD})",
    )
    parser.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="trace",
        help=f"what {FGD} and {BALANCED_FGD} measure against: the trace's own mix of task shapes, as the paper "
        "(trace, the default); the workload the scheduler learns from the pods it sees, starting empty as a "
        "fresh cluster's does (learned); or learned starting from the trace's mix as a configured prior (prior)",
    )
    parser.add_argument(
        "--pending",
        type=int,
        default=0,
        metavar="N",
        help="the first N pods of each seed are pending when the scheduler starts (a learned workload counts "
        "them at once; default 0)",
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
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="draw unallocated GPU %% vs arrived load")
    parser.add_argument(
        "--claims-fraction",
        type=float,
        default=0.0,
        metavar="F",
        help="also run each policy with about this share of the GPU pods asking through ResourceClaims "
        "(DRA), as the row POLICY+claims (default 0: not)",
    )
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    simulate_defrag.add_arguments(parser)
    simulate_mix.add_arguments(parser)


def parse_seeds(text: str) -> list[int]:
    """`1-10`, `1,3,5`, `7`. Raises ValueError."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        seeds += range(int(low), int(high) + 1) if high else [int(low)]
    if not seeds:
        raise ValueError("no seeds")
    return seeds


def parse_scoring(text: str) -> list[str]:
    """`A,B,C` of SCORING_CHOICES, each once, in order. Raises ValueError naming the bad one."""
    out: list[str] = []
    for part in text.split(","):
        name = part.strip()
        if name not in SCORING_CHOICES:
            raise ValueError(f"--scoring: unknown policy {name!r} (choose from {', '.join(SCORING_CHOICES)})")
        if name in out:
            raise ValueError(f"--scoring: {name} given twice")
        out.append(name)
    return out


@dataclass(frozen=True, slots=True)
class _Policy:
    """One policy of the comparison: its config, its seeds' results and wall time."""

    name: str
    config: SchedulerConfig
    #: share of the GPU pods asking through ResourceClaims (0: the trace as it is)
    claims_fraction: float = 0.0
    results: list[replay.SeedResult] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def run(args: argparse.Namespace) -> int:
    try:
        seeds = parse_seeds(args.seeds)
        policies = parse_scoring(args.scoring)
        nodes_path = args.nodes or args.data / NODES_FILE
        pods_path = args.pods or args.data / f"openb_pod_list_{args.trace}.csv"
        with nodes_path.open(encoding="utf-8") as f:
            nodes = trace.parse_nodes(f, source=str(nodes_path))
        with pods_path.open(encoding="utf-8") as f:
            pods = trace.parse_pods(f, source=str(pods_path))
        mix = simulate_mix.spec_from(args)
        pods = simulate_mix.apply(args, mix, pods, nodes)
        if args.write_pods is not None:
            args.write_pods.write_text(mixes.to_csv(pods), encoding="utf-8")
            print(f"wrote {len(pods)} pods to {args.write_pods}: {simulate_mix.summary(pods)}")
            return 0
        base = load_config(args.config.read_text(encoding="utf-8")) if args.config else SchedulerConfig()
        base = with_percentage_of_nodes_to_score(base, args.percentage_of_nodes_to_score)
        if args.pending < 0:
            raise ValueError(f"--pending: expected a number of pods, got {args.pending}")
        if not 0.0 <= args.claims_fraction <= 1.0:
            raise ValueError(f"--claims-fraction must be within 0..1, got {args.claims_fraction}")
        measured = any(p in FGD_CHOICES for p in policies) and args.workload != "learned"
        workload = trace.workload(pods) if measured else ()
        prior = args.workload == "prior"
        runs = []
        for name in policies:
            config = with_scoring_choice(base, name, workload if name in FGD_CHOICES else (), prior=prior)
            runs.append(_Policy(name, config))
            if args.claims_fraction > 0:
                runs.append(_Policy(f"{name}{CLAIMS_SUFFIX}", config, args.claims_fraction))
        if args.plot is not None:
            simulate_plot.check_available()
        defrag = simulate_defrag.DefragSettings.from_args(args) if args.defrag else None
        if defrag is not None and len(runs) > 1:
            raise ValueError("--defrag measures one policy: give --scoring one, without --claims-fraction")
    except (OSError, ValueError, ValidationError, ConfigError, simulate_plot.PlotUnavailable) as e:
        print(f"tessera simulate: {e}", file=sys.stderr)
        return 1
    started = time.monotonic()
    jobs = args.jobs or min(len(seeds) * len(runs), os.cpu_count() or 1)
    if defrag is not None:
        results = simulate_defrag.run_seeds(nodes, pods, seeds, runs[0].config, defrag, jobs=jobs)
        if args.output == "table":
            print(f"trace {pods_path.name}, {runs[0].name}, fill to x = {defrag.load}, then defragmentation")
        print(simulate_defrag.report(results, defrag, output=args.output))
        return 0
    bar = ProgressBar(len(seeds) * len(runs), sys.stderr)
    _run_all(nodes, pods, seeds, runs, jobs=jobs, bar=bar, pending=args.pending)
    wall = time.monotonic() - started
    common = {
        "nodes": str(nodes_path),
        "pods": str(pods_path),
        "gpus": sum(n.gpus for n in nodes),
        "percentage_of_nodes_to_score": args.percentage_of_nodes_to_score,
        "workload": args.workload,
        "pending": args.pending,
        "seeds": seeds,
        "claims_fraction": args.claims_fraction,
    }
    if not mix.empty:
        common["mix"] = {k: round(v, 2) for k, v in mixes.describe(pods).items()}
    docs = {r.name: _policy_doc(r) for r in runs}
    reference = published.PUBLISHED.get(args.trace) if args.pods is None and mix.empty else None
    if args.plot is not None:
        try:
            curves = {r.name: replay.summarize(r.results).curve for r in runs}
            paper = {"FGD": reference["FGD"]} if reference else None
            simulate_plot.plot_curves(curves, args.plot, title=f"{pods_path.name}, seeds {args.seeds}", reference=paper)
        except (OSError, simulate_plot.PlotUnavailable) as e:
            print(f"tessera simulate: --plot {args.plot}: {e}", file=sys.stderr)
            return 1
    if args.output == "json":
        if len(runs) == 1:  # the shape scripts already read
            only = runs[0].name
            print(json.dumps({**common, "scoring": only, **docs[only], "wall_seconds": round(wall, 1)}, indent=2))
        else:
            doc = {**common, "scoring": policies, "policies": docs, "wall_seconds": round(wall, 1)}
            if reference:
                doc["published"] = dict(reference)
            print(json.dumps(doc, indent=2))
        return 0
    mixed = "" if mix.empty else f" mixed ({simulate_mix.summary(pods)})"
    print(f"trace {pods_path.name}{mixed} on {common['gpus']} GPUs, seeds {args.seeds}, {wall:.0f}s")
    print(_table(runs))
    if reference:
        print("published (paper, x=100): " + ", ".join(f"{k} {v:.2f}" for k, v in reference.items()))
    return 0


_CURVE_COLUMNS = (90, 110, 130)


def _table(runs: list[_Policy]) -> str:
    """Policies side by side: unallocated GPU % at x = 100 (mean ± sd), a few more x, time."""
    head = ["policy", "x=100 (mean ± sd)", *(f"x={x}" for x in _CURVE_COLUMNS), "CPU s/seed"]
    rows = [head]
    for r in runs:
        summary = replay.summarize(r.results)
        mean, sd = summary.unallocated_at_100
        curve = [f"{summary.curve[x]:.2f}" if x in summary.curve else "-" for x in _CURVE_COLUMNS]
        per_seed = sum(r.seconds) / len(r.seconds) if r.seconds else 0.0
        rows.append([r.name, f"{mean:.2f} ± {sd:.2f}", *curve, f"{per_seed:.1f}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def _policy_doc(run: _Policy) -> dict[str, object]:
    summary = replay.summarize(run.results)
    return {
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
                "claim_pods": r.claim_pods,
                "seconds": round(s, 1),
            }
            for r, s in zip(run.results, run.seconds, strict=True)
        ],
        "curve": {str(x): round(v, 3) for x, v in summary.curve.items()},
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _timed_replay(
    nodes: list[trace.TraceNode],
    pods: list[trace.TracePod],
    seed: int,
    config: SchedulerConfig,
    pending: int,
    *,
    claims_fraction: float = 0.0,
) -> tuple[replay.SeedResult, float]:
    """One seed, with the CPU time it took (the wall time of a run depends on its neighbours)."""
    start = time.process_time()
    result = replay.replay(nodes, pods, seed=seed, config=config, pending=pending, claims_fraction=claims_fraction)
    return result, time.process_time() - start


def _run_all(
    nodes: list[trace.TraceNode],
    pods: list[trace.TracePod],
    seeds: list[int],
    runs: list[_Policy],
    *,
    jobs: int,
    bar: ProgressBar,
    pending: int = 0,
) -> None:
    """Every (policy, seed), `jobs` processes at once (in this one when 1); results land in
    each policy's lists in seed order."""
    tasks = [(r, seed) for r in runs for seed in seeds]
    done: dict[tuple[str, int], tuple[replay.SeedResult, float]] = {}

    def finished(r: _Policy, seed: int, outcome: tuple[replay.SeedResult, float]) -> None:
        done[(r.name, seed)] = outcome
        value = outcome[0].unallocated(100)
        shown = f"{value:.2f}%" if value is not None else "n/a"
        bar.update(len(done), f"{r.name} seed {seed}: {shown} unallocated at x=100")

    try:
        if jobs <= 1:
            for r, seed in tasks:
                finished(
                    r, seed, _timed_replay(nodes, pods, seed, r.config, pending, claims_fraction=r.claims_fraction)
                )
        else:
            with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
                futures = {
                    pool.submit(
                        _timed_replay, nodes, pods, seed, r.config, pending, claims_fraction=r.claims_fraction
                    ): (
                        r,
                        seed,
                    )
                    for r, seed in tasks
                }
                for future in concurrent.futures.as_completed(futures):
                    r, seed = futures[future]
                    finished(r, seed, future.result())
    finally:
        bar.close()
    for r, seed in tasks:
        result, seconds = done[(r.name, seed)]
        r.results.append(result)
        r.seconds.append(seconds)
