"""The leader-election flags of kube-scheduler and kube-controller-manager, declared once.

`tessera scheduler` and `tessera controller` run as several replicas of which only the Lease
holder works (`kube.leaderelection`). Both take this one flag set, with Kubernetes' names and
defaults (component-base's LeaderElectionConfiguration: `--leader-elect`, 15s lease, 10s renew
deadline, 2s retry period, a Lease name and namespace, and the replica's identity), so the two
cannot drift apart and a manifest written for kube-scheduler's flags works unchanged: durations
take a number of seconds or a Go duration (`15s`, `1m`), `--leader-elect` also `=true|false`.

`add_arguments(parser, lease_name=...)` declares them; `settings_from(args)` turns the parsed
flags into a validated `LeaderElectionSettings`, or None without `--leader-elect`.
"""

from __future__ import annotations

import argparse
import math

from apis.extension.gang import parse_duration
from kube.leaderelection import LeaderElectionSettings, identity_from_env

__all__ = ["add_arguments", "settings_from"]

_TRUE = {"1", "t", "true"}
_FALSE = {"0", "f", "false"}


def _bool(text: str) -> bool:
    """A Go flag's boolean (strconv.ParseBool, case-insensitive)."""
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _duration(text: str) -> float:
    """Seconds, from `15`, `15s`, `1m30s` or `500ms`. Whether the value makes sense is for
    `LeaderElectionSettings.validate`, which sees all three timings together."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_duration(text)
        except ValueError:
            seconds = math.nan
    if not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(f"expected seconds or a duration such as 15s, got {text!r}")
    return seconds


def add_arguments(parser: argparse.ArgumentParser, *, lease_name: str) -> None:
    """Add the flags, in a group of their own; `lease_name` is this component's Lease by default."""
    defaults = LeaderElectionSettings(lease_name=lease_name, identity="")
    group = parser.add_argument_group(
        "leader election", "run several replicas: only the one holding the Lease works, the others wait warm"
    )
    group.add_argument(
        "--leader-elect",
        type=_bool,
        nargs="?",
        const=True,
        default=False,
        metavar="BOOL",
        help="campaign for the Lease and work only while holding it; required with more than one replica (default off)",
    )
    timings = (
        ("lease-duration", defaults.lease_duration, "how long others wait after the last renewal they saw"),
        ("renew-deadline", defaults.renew_deadline, "a leader that cannot renew for this long steps down"),
        ("retry-period", defaults.retry_period, "how often candidates try to acquire and the leader renews"),
    )
    for name, default, meaning in timings:
        group.add_argument(
            f"--leader-elect-{name}",
            type=_duration,
            default=default,
            metavar="DURATION",
            help=f"{meaning} (seconds or a duration such as 15s; default {default:g}s)",
        )
    group.add_argument(
        "--leader-elect-resource-name", default=lease_name, metavar="NAME", help=f"the Lease (default {lease_name})"
    )
    group.add_argument(
        "--leader-elect-resource-namespace",
        default=defaults.namespace,
        metavar="NAMESPACE",
        help=f"the Lease's namespace (default {defaults.namespace})",
    )
    group.add_argument(
        "--leader-elect-identity",
        default="",
        metavar="ID",
        help="this replica's name in the Lease (default: $POD_NAME, else HOSTNAME_RANDOM)",
    )


def settings_from(args: argparse.Namespace) -> LeaderElectionSettings | None:
    """The flags `add_arguments` added, as settings; None without `--leader-elect`.

    Raises ConfigError naming every problem when the timings cannot work together (Kubernetes'
    rule: lease duration > renew deadline > retry period > 0) or a name is empty.
    """
    if not args.leader_elect:
        return None
    settings = LeaderElectionSettings(
        lease_name=args.leader_elect_resource_name,
        namespace=args.leader_elect_resource_namespace,
        identity=args.leader_elect_identity or identity_from_env(),
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
    )
    settings.validate()
    return settings
