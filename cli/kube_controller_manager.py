"""`tessera kube-controller-manager`: the embedded cluster's workload controllers (kubecontrollers/).

Thin: flags become `KubeControllersSettings`; `kubecontrollers.run` does the rest. `tessera up`
runs it; against a real cluster, kube-controller-manager does this job and this is not run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import kubecontrollers
from apis.errors import ConfigError
from kube.client import ClientSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = kubecontrollers.KubeControllersSettings()
    ClientSettings.add_arguments(parser)
    parser.add_argument(
        "--listen",
        default=f"{defaults.host}:{defaults.port}",
        metavar="HOST:PORT",
        help=f"address of /healthz, /readyz and /metrics (default {defaults.host}:{defaults.port}; port 0: any)",
    )
    parser.add_argument(
        "--listen-address-file", type=Path, metavar="PATH", help="write the bound HOST:PORT here once serving"
    )
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
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"--listen {args.listen!r}: expected HOST:PORT")
    settings = kubecontrollers.KubeControllersSettings(
        client=ClientSettings.from_args(args, user_agent="tessera-kube-controller-manager"),
        host=host.strip("[]") or "0.0.0.0",
        port=int(port),
        address_file=args.listen_address_file,
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
