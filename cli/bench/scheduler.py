"""Scheduler throughput and cycle latency on a synthetic GPU cluster (DeviceShare on).

`tessera bench scheduler --nodes 1000 --gpus-per-node 8 --pods 5000 -o json`: nodes with
2 NUMA nodes × 2 PCIe switches and an RDMA NIC per switch, pods drawn from the Alibaba trace's
shapes; every pod runs the whole cycle. Reports pods/s and p50/p99 cycle latency.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from apis.errors import ConfigError
from scheduler.core import FGD, SCORING_CHOICES, with_percentage_of_nodes_to_score, with_scoring_choice
from scheduler.framework.config import SchedulerConfig, load_config
from scheduler.simulation.bench import run_bench


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=1000, help="number of nodes (default 1000)")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    parser.add_argument("--pods", type=int, default=5000, help="pods to schedule (default 5000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the request mix and tie-breaking")
    parser.add_argument(
        "--scoring",
        choices=SCORING_CHOICES,
        help=f"scoring strategy, or {FGD} (fragmentation gradient descent, workload learned from the pods)",
    )
    parser.add_argument(
        "--percentage-of-nodes-to-score", type=int, help="as kube-scheduler (default: the config's; 0 = adaptive)"
    )
    parser.add_argument("--config", type=Path, help="scheduler configuration (YAML)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")


def run(args: argparse.Namespace) -> int:
    if args.nodes < 1 or args.pods < 1 or args.gpus_per_node < 0:
        print("tessera bench scheduler: --nodes and --pods must be positive", file=sys.stderr)
        return 1
    try:
        config = load_config(args.config.read_text(encoding="utf-8")) if args.config else SchedulerConfig()
    except (OSError, ConfigError) as e:
        print(f"tessera bench scheduler: {e}", file=sys.stderr)
        return 1
    if args.scoring:
        config = with_scoring_choice(config, args.scoring)
    if args.percentage_of_nodes_to_score is not None:
        config = with_percentage_of_nodes_to_score(config, args.percentage_of_nodes_to_score)
    result = run_bench(
        nodes=args.nodes, gpus_per_node=args.gpus_per_node, pods=args.pods, seed=args.seed, config=config
    )
    if args.output == "json":
        print(result.to_json())
    else:
        print(
            f"{result.pods} pods on {result.nodes} nodes × {result.gpus_per_node} GPUs: "
            f"{result.pods_per_second:.0f} pods/s, p50 {result.p50_ms:.2f} ms, p99 {result.p99_ms:.2f} ms "
            f"({result.scheduled} scheduled, setup {result.setup_seconds:.1f} s)"
        )
    return 0
