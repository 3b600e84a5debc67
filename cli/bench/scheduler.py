"""Scheduler throughput and cycle latency on a synthetic GPU cluster (DeviceShare on).

`tessera bench scheduler --nodes 1000 --gpus-per-node 8 --pods 5000`: nodes with 2 NUMA nodes ×
2 PCIe switches and an RDMA NIC per switch, pods drawn from the Alibaba trace's shapes
(`scheduler.simulation.bench.synthetic_pods`); every pod runs the whole cycle
(`Scheduler.schedule_one`: filter, score, reserve, annotate, bind), timed one by one with nothing
excluded as warm-up. Reports pods/s and the cycle's latency percentiles.

`--gang-fraction 0.2` turns about a fifth of the pods into Strict gangs of `--gang-sizes 2-16`
members (Coscheduling: all or nothing), scheduled in the queue's order (a gang's members one
after another); pods held at Permit are resolved after every cycle, and that resolution is part
of the cycle's time. It also reports how long the last member's cycle plus the binding of the
whole gang took (from the last member's arrival to the whole gang allowed and bound).

`--quotas 100` spreads the pods over 100 namespaces with an ElasticQuota each (min an equal share
of the cluster, max all of it) and enables the ElasticQuota plugin; every pod is charged to its
quota before the first cycle, as the live scheduler's informers do. Compare its pods/s with a run
without quotas (the issue asks ≥ 90 %).

`--reservations 100` places 100 Reservations of one whole GPU each first (owners: pods labelled
`app=bench-reserved`, which no benchmark pod is), so every cycle runs with that many Available
Reservations held in the cache: compare the cycle's cost with a run without.

`--baseline LeastAllocated` builds a second scheduler with that policy over its own copy of the
cluster and gives both the same pods, one to each in turn, so that both run under the same load
of a shared machine; it reports the baseline's pods/s and the ratio of the two (the figure to
quote where absolute numbers depend on the neighbours).

`--claims-fraction 0.3` asks for the GPUs of about 30 % of the GPU pods through ResourceClaims
(Dynamic Resource Allocation: CEL selectors in the DeviceClass and the request, capacity
requests for a share of a GPU; every node's GPUs published as a ResourceSlice) and runs twice on
fresh clusters: the same pods all in Koordinator's protocol first (`koordinator_*` figures), then
with the claims; the DynamicResources plugin allocates on the same GPUs as DeviceShare. It also
reports the CEL selectors' cost: evaluations run (each selector once per device: the others are
answered from the compiler's cache), the time of one, and their time per node judged for a pod
with claims; and how often the allocator ran per node judged (nodes alike share its answers).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from apis.crds.reservation import Reservation
from apis.dra import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES
from apis.dra import gpus as dra_gpus
from apis.errors import ConfigError
from apis.extension import names
from apis.k8s.core import Pod
from apis.k8s.meta import now_rfc3339
from apis.quota import capacity_of
from cli.bench._report import Report, Timer
from scheduler.core import (
    BALANCED_FGD,
    FGD,
    SCORING_CHOICES,
    Scheduler,
    with_elastic_quota,
    with_percentage_of_nodes_to_score,
    with_scoring_choice,
)
from scheduler.framework.config import SchedulerConfig, load_config
from scheduler.plugins.dynamicresources import NAME as DYNAMIC_RESOURCES
from scheduler.plugins.dynamicresources import DynamicResources
from scheduler.simulation.bench import GPU_CLASS, synthetic_pods, with_claims, with_gangs, with_quota_per_namespace
from scheduler.simulation.cluster import NodeShape, gpu_node


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=1000, help="number of nodes (default 1000)")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    parser.add_argument("--pods", type=int, default=5000, help="pods to schedule (default 5000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the request mix and tie-breaking")
    parser.add_argument(
        "--scoring",
        choices=SCORING_CHOICES,
        help=f"scoring strategy, or {FGD} / {BALANCED_FGD} (fragmentation gradient descent, without or with "
        "CPU/memory balance; workload learned from the pods)",
    )
    parser.add_argument(
        "--baseline",
        choices=SCORING_CHOICES,
        help="also run this policy on a copy of the cluster, pod for pod in turn, and report the ratio of the "
        "two throughputs (measured under the same load)",
    )
    parser.add_argument(
        "--percentage-of-nodes-to-score", type=int, help="as kube-scheduler (default: the config's; 0 = adaptive)"
    )
    parser.add_argument("--config", type=Path, help="scheduler configuration (YAML)")
    parser.add_argument(
        "--gang-fraction", type=float, default=0.0, help="share of the pods in Strict gangs (default 0: none)"
    )
    parser.add_argument(
        "--gang-sizes", default="2-16", metavar="MIN-MAX", help="members per gang, inclusive (default 2-16)"
    )
    parser.add_argument(
        "--quotas",
        type=int,
        default=0,
        metavar="N",
        help="spread the pods over N namespaces with an ElasticQuota each, ElasticQuota on (default 0: none)",
    )
    parser.add_argument(
        "--reservations",
        type=int,
        default=0,
        metavar="N",
        help="place N Reservations of 1 GPU first, owned by no benchmark pod (default 0: none)",
    )
    parser.add_argument(
        "--claims-fraction",
        type=float,
        default=0.0,
        help="share of the GPU pods asking through ResourceClaims, compared with a run without (default 0)",
    )


def _config(args: argparse.Namespace, scoring: str | None) -> SchedulerConfig:
    """The scheduler configuration the flags ask for, placing by `scoring` (None: the
    config's); ConfigError when they cannot work."""
    if args.nodes < 1 or args.pods < 1 or args.gpus_per_node < 0:
        raise ConfigError("--nodes and --pods must be positive, --gpus-per-node not negative")
    for flag, fraction in (("--gang-fraction", args.gang_fraction), ("--claims-fraction", args.claims_fraction)):
        if not 0.0 <= fraction <= 1.0:
            raise ConfigError(f"{flag} must be within 0..1, got {fraction}")
    _gang_sizes(args.gang_sizes)
    try:
        config = load_config(args.config.read_text(encoding="utf-8")) if args.config else SchedulerConfig()
    except OSError as e:
        raise ConfigError(f"--config: {e}") from e
    if scoring:
        config = with_scoring_choice(config, scoring)
    if args.percentage_of_nodes_to_score is not None:
        config = with_percentage_of_nodes_to_score(config, args.percentage_of_nodes_to_score)
    for flag, value in (("--quotas", args.quotas), ("--reservations", args.reservations)):
        if value < 0:
            raise ConfigError(f"{flag} must not be negative, got {value}")
    if args.quotas:
        config = with_elastic_quota(config)
    return config


def _reservations(count: int) -> list[Reservation]:
    """`count` Reservations of one whole GPU, for pods labelled app=bench-reserved."""
    template = {
        "spec": {
            "schedulerName": names.SCHEDULER_NAME,
            "containers": [{"name": "main", "resources": {"limits": {names.NVIDIA_GPU: "1"}}}],
        }
    }
    return [
        Reservation.from_dict(
            {
                "metadata": {"name": f"bench-{i:05d}", "uid": f"bench-reservation-{i}"},
                "spec": {
                    "template": template,
                    "owners": [{"labelSelector": {"matchLabels": {"app": "bench-reserved"}}}],
                    "ttl": "0s",
                },
            }
        )
        for i in range(count)
    ]


def _gang_sizes(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    if not (low.isdigit() and high.isdigit()) or not 1 <= int(low) <= int(high):
        raise ConfigError(f"--gang-sizes must be MIN-MAX with 1 <= MIN <= MAX, got {text!r}")
    return int(low), int(high)


@dataclass(slots=True)
class _Run:
    """One scheduler under test: its cycles' times, the gangs it allowed, its CPU time."""

    scheduler: Scheduler
    cycle: Timer = field(default_factory=Timer)
    allowed: Timer = field(default_factory=Timer)
    scheduled: int = 0
    cpu_seconds: float = 0.0

    @property
    def wall_seconds(self) -> float:
        """Time in its cycles (not the span from the first to the last: with a baseline, the
        other scheduler's cycles fall between them)."""
        return math.fsum(self.cycle.samples)

    def step(self, pod: Pod) -> None:
        """One pod's whole cycle, pods held at Permit resolved after it (part of its time)."""
        scheduler = self.scheduler
        gang_member = names.ANNOTATION_GANG_NAME in pod.annotations
        cpu_start = time.thread_time()
        with self.cycle.time():
            outcome = scheduler.schedule_one(pod)
            decided = scheduler.resolve_waiting() if scheduler.cycle.waiting or gang_member else []
        self.cpu_seconds += time.thread_time() - cpu_start
        self.scheduled += outcome.scheduled + sum(o.scheduled for o in decided)
        if gang_member and outcome.scheduled and decided:  # the last member: the gang was allowed
            self.allowed.samples.append(self.cycle.samples[-1])


def run(args: argparse.Namespace, report: Report) -> int:
    config = _config(args, args.scoring)
    baseline_config = _config(args, args.baseline) if args.baseline else None
    report.setting(
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        pods=args.pods,
        seed=args.seed,
        gang_fraction=args.gang_fraction,
        quotas=args.quotas,
        reservations=args.reservations,
        claims_fraction=args.claims_fraction,
        baseline=args.baseline or "",
    )
    if args.claims_fraction > 0:
        # The same pods all in Koordinator's protocol first, on a cluster of their own.
        _run_once(args, config, None, report, claims_fraction=0.0, prefix="koordinator_")
    return _run_once(args, config, baseline_config, report, claims_fraction=args.claims_fraction, prefix="")


def _run_once(
    args: argparse.Namespace,
    config: SchedulerConfig,
    baseline_config: SchedulerConfig | None,
    report: Report,
    *,
    claims_fraction: float,
    prefix: str,
) -> int:
    """Build the cluster (and the baseline's copy) and schedule the pods once, each pod given
    to both in turn; figures named with `prefix`."""
    setup_start = time.perf_counter()
    main = _Run(_cluster(args, config, report, prefix=prefix))
    baseline = _Run(_cluster(args, baseline_config, None, prefix=prefix)) if baseline_config is not None else None
    runs = [r for r in (main, baseline) if r is not None]
    workload = _pods(args, [r.scheduler for r in runs], report, claims_fraction=claims_fraction)
    report.value(f"{prefix}setup_seconds", time.perf_counter() - setup_start, "s", label="cluster and pods built")
    for i, pod in enumerate(workload):
        # In turn, and each first every other pod: neither always runs right after the other.
        for r in runs if i % 2 == 0 else runs[::-1]:
            r.step(pod)
    if args.gang_fraction > 0:
        for r in runs:
            # What still waits when the pods ran out waits in vain: undo it, as its timeout would.
            r.scheduler.resolve_waiting(now=math.inf)
        report.value(
            f"{prefix}gang_pods",
            sum(names.ANNOTATION_GANG_NAME in p.annotations for p in workload),
            "pods",
            label="pods in gangs",
        )
        report.value(f"{prefix}gangs_allowed", len(main.allowed.samples), "gangs", label="gangs allowed whole")
        if main.allowed.samples:
            report.latencies(
                main.allowed.summary(), f"{prefix}gang_allowed", label="last member's arrival to the gang bound"
            )
    what = "in Koordinator's protocol only: " if prefix else ""
    report.value(f"{prefix}scheduled", main.scheduled, "pods", label=f"{what}pods scheduled")
    report.value(f"{prefix}wall_seconds", main.wall_seconds, "s", label=f"{what}scheduling took")
    rate = report.rate(f"{prefix}pods_per_second", args.pods, main.wall_seconds, "pods", label=f"{what}throughput")
    # CPU time too: on a machine shared with other work, wall time includes waiting for a core.
    cpu_rate = report.rate(
        f"{prefix}pods_per_cpu_second", args.pods, main.cpu_seconds, "pods", label=f"{what}throughput per CPU second"
    )
    report.latencies(main.cycle.summary(), f"{prefix}cycle" if prefix else None, label=f"{what}scheduling cycle")
    if baseline is not None:
        label = f"baseline {args.baseline}"
        report.value("baseline_scheduled", baseline.scheduled, "pods", label=f"{label}: pods scheduled")
        base_rate = report.rate(
            "baseline_pods_per_second", args.pods, baseline.wall_seconds, "pods", label=f"{label}: throughput"
        )
        base_cpu = report.rate(
            "baseline_pods_per_cpu_second", args.pods, baseline.cpu_seconds, "pods", label=f"{label}: per CPU second"
        )
        report.latencies(baseline.cycle.summary(), "baseline_cycle", label=f"{label}: scheduling cycle")
        report.value("ratio", round(rate / base_rate, 3) if base_rate else None, label="throughput / baseline's")
        ratio_cpu = round(cpu_rate / base_cpu, 3) if base_cpu else None
        report.value("ratio_cpu", ratio_cpu, label="per CPU second / baseline's")
    if claims_fraction > 0:
        _report_claims(main.scheduler, report)
    return 0


def _report_claims(scheduler: Scheduler, report: Report) -> None:
    """The CEL selectors' cost and the allocator's runs, per node judged for a pod with claims."""
    plugin = next(iter(scheduler.frameworks.values())).plugin(DYNAMIC_RESOURCES)
    if not isinstance(plugin, DynamicResources) or not plugin.nodes_filtered:
        return
    compiler, nodes = plugin.compiler, plugin.nodes_filtered
    report.value("claim_nodes_filtered", nodes, "nodes", label="nodes judged for pods with claims")
    report.value("cel_evaluations", compiler.evaluations, "", label="CEL evaluations run", cel_cached=compiler.cached)
    if compiler.evaluations:
        per = compiler.evaluation_seconds / compiler.evaluations
        report.value("cel_evaluation_us", per * 1e6, "µs", label="CEL: one evaluation")
    report.value("cel_us_per_node", compiler.evaluation_seconds / nodes * 1e6, "µs", label="CEL: time per node judged")
    report.value("allocator_runs_per_node", plugin.allocator_runs / nodes, "", label="allocator runs per node judged")


def _cluster(args: argparse.Namespace, config: SchedulerConfig, report: Report | None, *, prefix: str) -> Scheduler:
    """A scheduler over the flags' nodes (and Reservations; `report`: say how many were placed)."""
    scheduler = Scheduler(config, seed=args.seed)
    shape = NodeShape(gpus=args.gpus_per_node)
    for i in range(args.nodes):
        node, device = gpu_node(f"node-{i:05d}", shape)
        scheduler.cache.add_node(node)
        scheduler.cache.add_device(device)
        if args.claims_fraction > 0:
            scheduler.feeds.deliver(RESOURCE_SLICES, dra_gpus.gpu_slice(device))
    if args.claims_fraction > 0:
        scheduler.feeds.deliver(DEVICE_CLASSES, GPU_CLASS)
    now = now_rfc3339()
    placed = sum(scheduler.place_reservation(r, now=now)[0].scheduled for r in _reservations(args.reservations))
    if args.reservations and report is not None:
        report.value(f"{prefix}reservations_available", placed, "reservations", label="Reservations available")
    return scheduler


def _pods(
    args: argparse.Namespace, schedulers: list[Scheduler], report: Report, *, claims_fraction: float
) -> list[Pod]:
    """The pods, in the order to schedule them, each scheduler told what it must know first
    (claims, quotas charged, gang members seen), as the live scheduler's informers tell it."""
    workload = synthetic_pods(args.pods, seed=args.seed)
    if claims_fraction > 0:
        gpu_memory = NodeShape(gpus=args.gpus_per_node).gpu_memory
        workload, claims = with_claims(workload, fraction=claims_fraction, seed=args.seed, gpu_memory=gpu_memory)
        for scheduler in schedulers:
            for claim in claims:
                scheduler.feeds.deliver(RESOURCE_CLAIMS, claim)
        report.value("claim_pods", len(claims), "pods", label="pods asking through ResourceClaims")
    if args.quotas:
        # As the live scheduler's informers do: every pod is charged (pending) before any cycle.
        cluster = dict(capacity_of(info.allocatable for info in schedulers[0].cache.nodes()).total)
        workload, quotas = with_quota_per_namespace(workload, quotas=args.quotas, cluster=cluster)
        for scheduler in schedulers:
            scheduler.quotas.set_quotas(quotas)
            for pod in workload:
                scheduler.quotas.update_pod(pod)
    if args.gang_fraction > 0:
        workload = with_gangs(workload, fraction=args.gang_fraction, sizes=_gang_sizes(args.gang_sizes), seed=args.seed)
        for scheduler in schedulers:
            for pod in workload:
                scheduler.observe_pod(pod)
        workload = [workload[i] for i in schedulers[0].queue_order(workload)]
    return workload
