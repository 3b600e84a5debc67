"""`tessera scheduler`: the device-aware scheduler (see docs/user/scheduler.md).

Thin: flags become `SchedulerSettings`; `scheduler.service.run` does the rest.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from apis.errors import ConfigError
from apis.extension import names
from kube import ClientSettings, leaderelectionflags, servingflags
from scheduler import service
from scheduler.service import (
    ADDRESS_ENV,
    BinderSettings,
    GRPCSettings,
    HTTPSettings,
    QueueSettings,
    SchedulerSettings,
    TLSSettings,
    default_address,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    ClientSettings.add_arguments(parser)
    parser.add_argument("--config", type=Path, metavar="FILE", help="scheduler configuration: profiles, plugins, args")
    leaderelectionflags.add_arguments(parser, lease_name=names.SCHEDULER_NAME)
    serving = parser.add_argument_group("serving")
    serving.add_argument(
        "--grpc-address",
        default=None,
        metavar="ADDRESS",
        help=f"gRPC API: unix:///path, /path or HOST:PORT; '' turns it off (default ${ADDRESS_ENV}, "
        f"else {default_address({})} for this user)",
    )
    serving.add_argument("--grpc-tls-cert", type=Path, metavar="FILE", help="serve gRPC over TLS with this certificate")
    serving.add_argument("--grpc-tls-key", type=Path, metavar="FILE", help="the certificate's private key")
    serving.add_argument("--grpc-tls-client-ca", type=Path, metavar="FILE", help="require client certificates")
    serving.add_argument(
        "--http-address",
        default="127.0.0.1:10251",
        metavar="HOST:PORT",
        help="diagnostics, /metrics, /healthz, /readyz ('' turns it off; default 127.0.0.1:10251)",
    )
    serving.add_argument(
        "--http-address-file", type=Path, metavar="PATH", help="write the bound HOST:PORT here once serving"
    )
    serving.add_argument("--debug-scores", type=int, default=0, metavar="N", help="log the top-N score table per pod")
    servingflags.add_tls_arguments(serving)
    tuning = parser.add_argument_group("tuning")
    tuning.add_argument("--pod-initial-backoff", type=float, default=1.0, metavar="SECONDS")
    tuning.add_argument("--pod-max-backoff", type=float, default=10.0, metavar="SECONDS")
    tuning.add_argument("--pod-max-unschedulable", type=float, default=300.0, metavar="SECONDS")
    tuning.add_argument("--bind-workers", type=int, default=16, metavar="N", help="bindings in flight at once")
    tuning.add_argument("--seed", type=int, default=0, help="seed of score tie-breaking")
    tuning.add_argument(
        "--unserved-name-grace",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a pod naming a scheduler no profile serves gets an Event once it waited this long unbound",
    )


def settings_from(args: argparse.Namespace) -> SchedulerSettings:
    """The validated settings; raises ConfigError naming every problem of flags that cannot work."""
    tls = None
    if args.grpc_tls_cert or args.grpc_tls_key:
        if not (args.grpc_tls_cert and args.grpc_tls_key):
            raise ConfigError("--grpc-tls-cert and --grpc-tls-key go together")
        tls = TLSSettings(args.grpc_tls_cert, args.grpc_tls_key, args.grpc_tls_client_ca)
    elif args.grpc_tls_client_ca:
        raise ConfigError("--grpc-tls-client-ca needs --grpc-tls-cert and --grpc-tls-key")
    address = args.grpc_address if args.grpc_address is not None else default_address(dict(os.environ))
    settings = SchedulerSettings(
        client=ClientSettings.from_args(args, user_agent=names.SCHEDULER_NAME),
        config_file=args.config,
        leader_election=leaderelectionflags.settings_from(args),
        grpc=GRPCSettings(address=address, tls=tls),
        http=HTTPSettings(
            address=args.http_address,
            debug_top_n_scores=args.debug_scores,
            address_file=args.http_address_file,
            tls=servingflags.tls_from(args),
        ),
        queue=QueueSettings(
            initial_backoff=args.pod_initial_backoff,
            max_backoff=args.pod_max_backoff,
            max_unschedulable=args.pod_max_unschedulable,
        ),
        binder=BinderSettings(workers=args.bind_workers),
        seed=args.seed,
        unserved_grace=args.unserved_name_grace,
    )
    settings.validate()
    return settings


def run(args: argparse.Namespace) -> int:
    """Flags that cannot work raise ConfigError: `tessera scheduler: reason`, exit code 2 (cli.main)."""
    return service.run(settings_from(args))
