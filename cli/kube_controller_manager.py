"""`tessera kube-controller-manager`: the embedded cluster's workload controllers (kubecontrollers/).

Thin: flags become `KubeControllersSettings`; `kubecontrollers.run` does the rest. `tessera up`
runs it; against a real cluster, kube-controller-manager does this job and this is not run.
"""

from __future__ import annotations

import argparse
import sys

import kubecontrollers
from kube import servingflags
from kube.client import ClientSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = kubecontrollers.KubeControllersSettings()
    ClientSettings.add_arguments(parser)
    servingflags.add_arguments(parser, default=defaults.serving)
    parser.add_argument(
        "--resync-period",
        type=float,
        default=defaults.resync_period,
        metavar="SECONDS",
        help=f"sync every object this often even without events (default {defaults.resync_period:g})",
    )
    parser.add_argument(
        "--job-backoff",
        type=float,
        default=defaults.job_backoff,
        metavar="SECONDS",
        help=f"delay before a failed Job pod is replaced, doubling per failure (default {defaults.job_backoff:g})",
    )
    parser.add_argument(
        "--node-monitor-grace-period",
        type=float,
        default=defaults.node_monitor_grace_period,
        metavar="SECONDS",
        help="a node without a heartbeat this long is marked Unknown and tainted unreachable "
        f"(default {defaults.node_monitor_grace_period:g})",
    )
    parser.add_argument(
        "--node-monitor-period",
        type=float,
        default=defaults.node_monitor_period,
        metavar="SECONDS",
        help=f"how often every node's heartbeat is looked at (default {defaults.node_monitor_period:g})",
    )


def settings_from(args: argparse.Namespace) -> kubecontrollers.KubeControllersSettings:
    """The validated settings; raises ConfigError for flags that cannot work."""
    settings = kubecontrollers.KubeControllersSettings(
        client=ClientSettings.from_args(args, user_agent="tessera-kube-controller-manager"),
        serving=servingflags.settings_from(args),
        resync_period=args.resync_period,
        job_backoff=args.job_backoff,
        node_monitor_grace_period=args.node_monitor_grace_period,
        node_monitor_period=args.node_monitor_period,
    )
    settings.validate()
    return settings


def run(args: argparse.Namespace) -> int:
    """Bad flags raise ConfigError (exit code 2, in cli.main); a port another process holds is exit code 1."""
    try:
        return kubecontrollers.run(settings_from(args))
    except OSError as e:
        print(f"tessera kube-controller-manager: cannot serve on {args.listen}: {e.strerror or e}", file=sys.stderr)
        return 1
