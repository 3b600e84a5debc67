"""Chaos soak: the whole system under a mixed load while components are killed, with invariants.

`tessera bench soak --duration 10m --nodes 50 --kill-interval 20s --seed 1 -o json` starts what
`tessera up` starts (simulated nodes only, ElasticQuota on), drives a workload of fractional and
whole-GPU pods, GPU + RDMA pods, Strict gangs and quota-limited pods that come and go
(`workload`), injects GPU faults and recoveries and SIGKILLs a random component now and then
(`chaos`), and checks invariants over the API server's objects throughout and at the end
(`invariants`, `checker`). It exits 1 when any invariant was violated (the report names each,
with the objects involved) or a component is not up at the end. docs/dev/soak.md.

    settings   the flags as one value        state      what the invariants see
    driver     one run, start to stop        observe    the soak's record; reading the API server
    workload   the pod mix                   holdings   who holds which device
    chaos      kills and GPU faults          fit        would a pending pod fit now?
    checker    checks while it runs          report     the result as a bench report
    invariants/  one module per family of invariants, and their registry
"""

from __future__ import annotations

import argparse

from cli.bench._report import Report
from cli.bench.soak.settings import SoakSettings, duration

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = SoakSettings()
    parser.add_argument("--duration", default="10m", help="how long load and kills run, e.g. 90s, 10m (default 10m)")
    parser.add_argument("--nodes", type=int, default=d.nodes, help=f"simulated GPU nodes (default {d.nodes})")
    parser.add_argument("--profile", default=d.profile, help=f"their devices (default {d.profile})")
    parser.add_argument("--kill-interval", default="20s", help="mean time between kills (default 20s)")
    parser.add_argument("--fault-interval", default="15s", help="mean time between GPU faults (default 15s)")
    parser.add_argument("--node-loss-interval", default="45s", help="mean time between node losses (default 45s)")
    parser.add_argument(
        "--node-down",
        default=f"{d.node_down_s:g}s",
        help=f"how long a lost node stays lost (default {d.node_down_s:g}s)",
    )
    parser.add_argument(
        "--node-monitor-grace",
        default=f"{d.node_monitor_grace_s:g}s",
        help="a node without a heartbeat this long is marked unreachable and tainted "
        f"(kube-controller-manager's --node-monitor-grace-period; default {d.node_monitor_grace_s:g}s)",
    )
    parser.add_argument(
        "--eviction-toleration",
        default=f"{d.eviction_toleration_s:g}s",
        help="the soak's pods tolerate an unreachable node this long, then are evicted "
        f"(default {d.eviction_toleration_s:g}s)",
    )
    parser.add_argument(
        "--rate", type=float, default=d.rate, help=f"pods (or gangs) created per second (default {d.rate:g})"
    )
    parser.add_argument(
        "--target-load",
        type=float,
        default=d.target_load,
        help=f"share of the GPUs kept busy, at most (default {d.target_load:g})",
    )
    parser.add_argument(
        "--pending-bound",
        default="30s",
        help="a pod that fits is bound within this long after the last kill (default 30s)",
    )
    parser.add_argument("--seed", type=int, default=d.seed, help="seed of the workload, the kills and the faults")
    parser.add_argument(
        "--data-dir", default=None, help="keep the system's objects and logs here (default: a temporary directory)"
    )


def run(args: argparse.Namespace, report: Report) -> int:
    from pathlib import Path

    from cli.bench.soak import report as soak_report
    from cli.bench.soak.driver import run_soak

    settings = SoakSettings(
        duration_s=duration(args.duration),
        nodes=args.nodes,
        profile=args.profile,
        kill_interval_s=duration(args.kill_interval),
        fault_interval_s=duration(args.fault_interval),
        node_loss_interval_s=duration(args.node_loss_interval),
        node_down_s=duration(args.node_down),
        node_monitor_grace_s=duration(args.node_monitor_grace),
        eviction_toleration_s=duration(args.eviction_toleration),
        rate=args.rate,
        target_load=args.target_load,
        pending_bound_s=duration(args.pending_bound),
        seed=args.seed,
        data_dir=Path(args.data_dir) if args.data_dir else None,
    )
    settings.validate()
    report.setting(
        duration_s=settings.duration_s,
        nodes=settings.nodes,
        profile=settings.profile,
        kill_interval_s=settings.kill_interval_s,
        fault_interval_s=settings.fault_interval_s,
        node_loss_interval_s=settings.node_loss_interval_s,
        node_down_s=settings.node_down_s,
        node_monitor_grace_s=settings.node_monitor_grace_s,
        eviction_toleration_s=settings.eviction_toleration_s,
        rate=settings.rate,
        target_load=settings.target_load,
        pending_bound_s=settings.pending_bound_s,
        seed=settings.seed,
    )
    result = run_soak(settings, progress=report.note)
    soak_report.put(result, report)
    return 1 if result.violations else 0
