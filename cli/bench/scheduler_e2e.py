"""End-to-end scheduling throughput: pods/s and create→bound latency through real processes.

`tessera bench scheduler-e2e --nodes 500 --pods 5000`: an embedded API server and `tessera
scheduler` as separate processes; this one creates the nodes (Device CRs with 8 GPUs each) and
pods of mixed GPU shapes, and measures from each create to the watch seeing the pod bound. See
cli/bench/_scheduler_e2e_load.py.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

from cli.bench._scheduler_e2e_load import run_e2e


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=500, help="nodes, each with a Device CR (default 500)")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    parser.add_argument("--pods", type=int, default=5000, help="pods to create (default 5000)")
    parser.add_argument("--creators", type=int, default=4, help="threads creating pods (default 4)")
    parser.add_argument(
        "--rate", type=float, default=0.0, metavar="PODS_PER_S", help="pace the creates (default: as fast as possible)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the pod shapes")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS", help="give up after this long")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")


def run(args: argparse.Namespace) -> int:
    if args.nodes < 1 or args.pods < 2 or args.creators < 1:
        print("tessera bench scheduler-e2e: need --nodes >= 1, --pods >= 2, --creators >= 1", file=sys.stderr)
        return 1

    def progress(line: str) -> None:
        if args.output == "table":
            print(f"# {line}", flush=True)

    if args.output == "table":
        print(f"# tessera scheduler end to end: python {platform.python_version()}, {os.cpu_count()} CPUs", flush=True)
    result = run_e2e(
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        pods=args.pods,
        creators=args.creators,
        rate=args.rate,
        seed=args.seed,
        timeout=args.timeout,
        progress=progress,
    )
    if args.output == "json":
        print(result.to_json())
    else:
        print(
            f"{result.bound}/{result.pods} pods bound on {result.nodes} nodes × {result.gpus_per_node} GPUs in "
            f"{result.seconds:.1f} s: {result.pods_per_second:.0f} pods/s; create→bound p50 {result.p50_ms:.0f} ms, "
            f"p99 {result.p99_ms:.0f} ms, max {result.max_ms:.0f} ms (created in {result.create_seconds:.1f} s"
            f"{f' at {result.rate:.0f}/s' if result.rate else ''}; "
            f"{result.over_committed} over-committed devices)"
        )
    return 0 if result.over_committed == 0 else 1
