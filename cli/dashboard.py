"""`tessera dashboard`: the web UI of the cluster's GPUs, pending pods, gangs, quotas and the
scheduler's health (docs/user/dashboard.md).

Thin: flags become `DashboardSettings`; `dashboard.run` does the rest. The scheduler's gRPC
address is resolved here as `tessera explain` resolves it (`--scheduler`, else
`$TESSERA_SCHEDULER_ADDRESS`, else this user's well-known socket), since the dashboard, a
component, does not import the scheduler.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import dashboard
from kube import servingflags
from kube.client import ClientSettings
from kube.serving import ServingSettings
from scheduler.service import ADDRESS_ENV, Endpoint, default_address


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = dashboard.DashboardSettings()
    ClientSettings.add_arguments(parser)
    servingflags.add_arguments(
        parser,
        default=ServingSettings(host=defaults.host, port=defaults.port),
        what="the page (loopback only unless told)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name the page is reached by (an Ingress's); IP addresses, localhost, Service names and "
        "this machine's name always work, others are refused (DNS rebinding). Repeatable",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help=f"the scheduler's gRPC API, for pending pods' reasons (default ${ADDRESS_ENV}, "
        f"else {default_address({})}; 'none': do not ask)",
    )
    parser.add_argument(
        "--scheduler-metrics",
        default="",
        metavar="URL",
        help="the scheduler's Prometheus endpoint, for its health (e.g. http://127.0.0.1:10251/metrics)",
    )
    parser.add_argument(
        "--scheduler-metrics-insecure-skip-tls-verify",
        action="store_true",
        help="an https --scheduler-metrics with a certificate not to verify (the scheduler's self-signed one)",
    )
    parser.add_argument(
        "--scheduler-address-file",
        type=Path,
        metavar="PATH",
        help="or the file the scheduler writes its HTTP HOST:PORT to (its --http-address-file), read at each scrape",
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=defaults.poll_interval,
        metavar="SECONDS",
        help=f"how often to ask the scheduler (default {defaults.poll_interval:g})",
    )
    parser.add_argument(
        "--explain-limit",
        type=int,
        default=defaults.explain_limit,
        metavar="N",
        help=f"pending pods explained, oldest first (default {defaults.explain_limit})",
    )


def settings_from(args: argparse.Namespace) -> dashboard.DashboardSettings:
    """The validated settings; raises ConfigError for flags that cannot work."""
    serving = servingflags.settings_from(args, default_host="127.0.0.1")
    address = args.scheduler or default_address(dict(os.environ))
    target = "" if address == "none" else Endpoint.parse(address).target
    settings = dashboard.DashboardSettings(
        client=ClientSettings.from_args(args, user_agent="tessera-dashboard"),
        host=serving.host,
        port=serving.port,
        address_file=serving.address_file,
        scheduler_target=target,
        scheduler_metrics_url=args.scheduler_metrics,
        scheduler_metrics_insecure=args.scheduler_metrics_insecure_skip_tls_verify,
        scheduler_address_file=args.scheduler_address_file,
        poll_interval=args.poll_interval,
        explain_limit=args.explain_limit,
        allowed_hosts=tuple(args.allowed_host),
        tls=serving.tls,
    )
    settings.validate()
    return settings


def run(args: argparse.Namespace) -> int:
    return dashboard.run(settings_from(args))
