"""`tessera controller`: the controller manager (node device resources, PodGroup and
ElasticQuota status, quota reclaim; see docs/user/controller.md).

Thin: flags become `ControllerSettings`; `controller.run` does the rest.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import controller
from controller.noderesources import NodeResourcesSettings
from controller.quotas import QuotaSettings
from controller.quotas.breaker import BreakerSettings
from controller.runtime import ManagerSettings
from controller.webhook import WebhookSettings
from kube import leaderelectionflags, servingflags
from kube.client import ClientSettings

#: The Lease replicas campaign on (in --leader-elect-resource-namespace).
LEASE_NAME = "tessera-controller"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    manager = ManagerSettings()
    node_defaults = NodeResourcesSettings()
    ClientSettings.add_arguments(parser)
    servingflags.add_arguments(parser, default=manager.serving)
    parser.add_argument(
        "--resync-period",
        type=float,
        default=manager.resync_period,
        metavar="SECONDS",
        help=f"re-check every object this often even without events (default {manager.resync_period:g}; 0: never)",
    )
    leaderelectionflags.add_arguments(parser, lease_name=LEASE_NAME)
    hooks = WebhookSettings()
    webhook_flags = parser.add_argument_group("admission webhook (ElasticQuota validation; off without a certificate)")
    webhook_flags.add_argument(
        "--webhook-bind-address",
        default=f"{hooks.host}:{hooks.port}",
        metavar="HOST:PORT",
        help=f"where the HTTPS webhook server listens (default {hooks.host}:{hooks.port})",
    )
    webhook_flags.add_argument(
        "--webhook-cert-file", type=Path, metavar="PATH", help="serving certificate (PEM; a Secret's tls.crt)"
    )
    webhook_flags.add_argument("--webhook-key-file", type=Path, metavar="PATH", help="its private key (PEM; tls.key)")
    node_flags = parser.add_argument_group("node device resources")
    node_flags.add_argument(
        "--node-resources-workers",
        type=int,
        default=node_defaults.workers,
        metavar="N",
        help="nodes reconciled in parallel",
    )
    node_flags.add_argument(
        "--resource-diff-threshold",
        type=float,
        default=node_defaults.diff_threshold,
        metavar="FRACTION",
        help=f"an increase below this share of the current amount may wait (default {node_defaults.diff_threshold:g})",
    )
    node_flags.add_argument(
        "--resource-max-delay",
        type=float,
        default=node_defaults.max_delay,
        metavar="SECONDS",
        help=f"the longest such an increase waits (default {node_defaults.max_delay:g})",
    )

    quota_defaults = QuotaSettings()
    quota_flags = parser.add_argument_group("elastic quota")
    quota_flags.add_argument(
        "--quota-reclaim-grace",
        type=float,
        default=quota_defaults.reclaim_grace,
        metavar="SECONDS",
        help="how long a quota may use more than its runtime before its lowest-priority preemptible pods "
        f"are evicted (default {quota_defaults.reclaim_grace:g})",
    )
    quota_flags.add_argument(
        "--quota-eviction-qps",
        type=float,
        default=quota_defaults.eviction_qps,
        metavar="N",
        help=f"reclaim evictions per second over all quotas, after a burst (default {quota_defaults.eviction_qps:g})",
    )
    quota_flags.add_argument(
        "--quota-eviction-burst",
        type=int,
        default=quota_defaults.eviction_burst,
        metavar="N",
        help=f"reclaim evictions allowed at once (default {quota_defaults.eviction_burst})",
    )
    breaker = quota_defaults.breaker
    quota_flags.add_argument(
        "--quota-breaker-root-drop",
        type=float,
        default=breaker.root_drop,
        metavar="FRACTION",
        help="reclaim pauses when one change lowers the root quota's total by more than this fraction of it "
        f"(default {breaker.root_drop:g})",
    )
    quota_flags.add_argument(
        "--quota-breaker-excess-rise",
        type=float,
        default=breaker.excess_rise,
        metavar="FRACTION",
        help="reclaim pauses when one change puts more than this fraction of the root's total in use above the "
        f"quotas' runtimes (default {breaker.excess_rise:g})",
    )
    quota_flags.add_argument(
        "--quota-breaker-stable",
        type=float,
        default=breaker.stable,
        metavar="SECONDS",
        help=f"a paused reclaim resumes once no such change was seen for this long (default {breaker.stable:g})",
    )
    quota_flags.add_argument(
        "--no-quota-breaker",
        dest="quota_breaker",
        action="store_false",
        help="never pause reclaim, whatever the figures do (not recommended)",
    )
    quota_flags.add_argument(
        "--no-quota-reclaim",
        dest="quota_reclaim",
        action="store_false",
        help="write quota status and annotations, but never evict",
    )


def settings_from(args: argparse.Namespace) -> controller.ControllerSettings:
    """The validated settings; raises ConfigError for flags that cannot work."""
    serving = servingflags.settings_from(args)
    webhook_host, webhook_port = servingflags.host_port("--webhook-bind-address", args.webhook_bind_address)
    settings = controller.ControllerSettings(
        client=ClientSettings.from_args(args, user_agent="tessera-controller"),
        manager=ManagerSettings(
            serving=serving,
            leader_election=leaderelectionflags.settings_from(args),
            resync_period=args.resync_period,
        ),
        node_resources=NodeResourcesSettings(
            diff_threshold=args.resource_diff_threshold,
            max_delay=args.resource_max_delay,
            workers=args.node_resources_workers,
        ),
        webhook=WebhookSettings(
            host=webhook_host, port=webhook_port, cert_file=args.webhook_cert_file, key_file=args.webhook_key_file
        ),
        quotas=QuotaSettings(
            reclaim_grace=args.quota_reclaim_grace,
            eviction_qps=args.quota_eviction_qps,
            eviction_burst=args.quota_eviction_burst,
            reclaim=args.quota_reclaim,
            breaker=BreakerSettings(
                root_drop=args.quota_breaker_root_drop,
                excess_rise=args.quota_breaker_excess_rise,
                stable=args.quota_breaker_stable,
                enabled=args.quota_breaker,
            ),
        ),
    )
    settings.validate()
    return settings


def run(args: argparse.Namespace) -> int:
    """Flags that cannot work raise ConfigError: `tessera controller: reason`, exit code 2 (cli.main);
    a port another process holds is exit code 1."""
    try:
        return controller.run(settings_from(args))
    except OSError as e:
        print(f"tessera controller: cannot serve on {args.listen}: {e.strerror or e}", file=sys.stderr)
        return 1
