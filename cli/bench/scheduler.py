"""Scheduler throughput and cycle latency on a synthetic GPU cluster (DeviceShare on).

`tessera bench scheduler --nodes 1000 --gpus-per-node 8 --pods 5000`: nodes with 2 NUMA nodes ×
2 PCIe switches and an RDMA NIC per switch, pods drawn from the Alibaba trace's shapes
(`scheduler.simulation.bench.synthetic_pods`); every pod runs the whole cycle
(`Scheduler.schedule_one`: filter, score, reserve, annotate, bind), timed one by one with nothing
excluded as warm-up. Reports pods/s and the cycle's latency percentiles.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from apis.errors import ConfigError
from cli.bench._report import Report, Timer
from scheduler.core import (
    FGD,
    SCORING_CHOICES,
    Scheduler,
    with_percentage_of_nodes_to_score,
    with_scoring_choice,
)
from scheduler.framework.config import SchedulerConfig, load_config
from scheduler.simulation.bench import synthetic_pods
from scheduler.simulation.cluster import NodeShape, gpu_node


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


def _config(args: argparse.Namespace) -> SchedulerConfig:
    """The scheduler configuration the flags ask for; ConfigError when they cannot work."""
    if args.nodes < 1 or args.pods < 1 or args.gpus_per_node < 0:
        raise ConfigError("--nodes and --pods must be positive, --gpus-per-node not negative")
    try:
        config = load_config(args.config.read_text(encoding="utf-8")) if args.config else SchedulerConfig()
    except OSError as e:
        raise ConfigError(f"--config: {e}") from e
    if args.scoring:
        config = with_scoring_choice(config, args.scoring)
    if args.percentage_of_nodes_to_score is not None:
        config = with_percentage_of_nodes_to_score(config, args.percentage_of_nodes_to_score)
    return config


def run(args: argparse.Namespace, report: Report) -> int:
    config = _config(args)
    report.setting(nodes=args.nodes, gpus_per_node=args.gpus_per_node, pods=args.pods, seed=args.seed)
    setup_start = time.perf_counter()
    scheduler = Scheduler(config, seed=args.seed)
    shape = NodeShape(gpus=args.gpus_per_node)
    for i in range(args.nodes):
        node, device = gpu_node(f"node-{i:05d}", shape)
        scheduler.cache.add_node(node)
        scheduler.cache.add_device(device)
    workload = synthetic_pods(args.pods, seed=args.seed)
    report.value("setup_seconds", time.perf_counter() - setup_start, "s", label="cluster and pods built")
    cycle = Timer()
    scheduled = 0
    for pod in workload:
        with cycle.time():
            scheduled += scheduler.schedule_one(pod).scheduled
    report.value("scheduled", scheduled, "pods", label="pods scheduled")
    report.value("wall_seconds", cycle.elapsed_s, "s", label="scheduling took")
    report.rate("pods_per_second", args.pods, cycle.elapsed_s, "pods", label="throughput")
    report.latencies(cycle.summary(), label="scheduling cycle")
    return 0
