"""`tessera descheduler`: the descheduler (PodMigrationJobs executed safely, GPU
defragmentation; see docs/user/descheduler.md).

Thin: flags (and `--config`, a YAML file of the arbitration settings) become
`DeschedulerSettings`; `descheduler.run` does the rest. A flag given on the command line wins
over the file, the file over the defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

import descheduler
from apis.errors import ConfigError
from descheduler.settings import DEFAULT_SERVING, ArbitrationSettings, DefragSettings, MigrationSettings
from kube import leaderelectionflags, servingflags
from kube.client import ClientSettings

#: The Lease replicas campaign on (in --leader-elect-resource-namespace).
LEASE_NAME = "tessera-descheduler"

#: Config file key -> (ArbitrationSettings field, flag dest).
_CONFIG_KEYS: Final = {
    "evictionQPS": "eviction_qps",
    "evictionBurst": "eviction_burst",
    "maxMigratingPerNode": "max_per_node",
    "maxMigratingPerNamespace": "max_per_namespace",
    "maxMigratingPerWorkload": "max_per_workload",
    "includeNamespaces": "include_namespaces",
    "excludeNamespaces": "exclude_namespaces",
    "dryRun": "dry_run",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    migration, arbitration, defrag = MigrationSettings(), ArbitrationSettings(), DefragSettings()
    ClientSettings.add_arguments(parser)
    servingflags.add_arguments(parser, default=DEFAULT_SERVING)
    leaderelectionflags.add_arguments(parser, lease_name=LEASE_NAME)
    jobs = parser.add_argument_group("PodMigrationJobs")
    jobs.add_argument(
        "--default-ttl",
        type=float,
        default=migration.default_ttl,
        metavar="SECONDS",
        help=f"a job's deadline when its spec.ttl is unset (default {migration.default_ttl:g})",
    )
    jobs.add_argument(
        "--resync",
        type=float,
        default=migration.resync,
        metavar="SECONDS",
        help=f"look at every unfinished job this often even without events (default {migration.resync:g})",
    )
    safety = parser.add_argument_group("safety arbitration (also in --config; flags win)")
    safety.add_argument("--config", type=Path, metavar="FILE", help="YAML file with the arbitration settings")
    _optional(safety, "--eviction-qps", float, "evictions per second over the cluster", arbitration.eviction_qps)
    _optional(safety, "--eviction-burst", int, "evictions allowed at once", arbitration.eviction_burst)
    _optional(safety, "--max-per-node", int, "migrations running from one node (0: no limit)", arbitration.max_per_node)
    _optional(
        safety,
        "--max-per-namespace",
        int,
        "migrations running in one namespace (0: no limit)",
        arbitration.max_per_namespace,
    )
    _optional(
        safety,
        "--max-per-workload",
        int,
        "migrations running of one workload (0: no limit)",
        arbitration.max_per_workload,
    )
    safety.add_argument(
        "--include-namespaces", type=_names, metavar="A,B", help="migrate only pods of these namespaces (default all)"
    )
    safety.add_argument(
        "--exclude-namespaces",
        type=_names,
        metavar="A,B",
        help=f"never migrate pods of these (default {','.join(arbitration.exclude_namespaces)})",
    )
    safety.add_argument(
        "--dry-run",
        action="store_const",
        const=True,
        default=None,
        help="evaluate jobs and report what would happen; create, evict and delete nothing",
    )
    strategy = parser.add_argument_group("GPU defragmentation (off without --scheduler-address)")
    strategy.add_argument(
        "--scheduler-address",
        default="",
        metavar="ADDRESS",
        help="the scheduler's gRPC API (PlanMigrations): a unix socket path or HOST:PORT",
    )
    strategy.add_argument("--defrag-interval", type=float, default=defrag.interval, metavar="SECONDS")
    strategy.add_argument(
        "--defrag-min-pending",
        type=float,
        default=defrag.min_pending,
        metavar="SECONDS",
        help=f"plan only for pods unschedulable this long (default {defrag.min_pending:g})",
    )
    strategy.add_argument("--defrag-max-migrations", type=int, default=defrag.max_migrations, metavar="N")


def _optional(group: argparse._ArgumentGroup, flag: str, kind: type, meaning: str, default: object) -> None:
    group.add_argument(flag, type=kind, default=None, metavar="N", help=f"{meaning} (default {default})")


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def arbitration_from(args: argparse.Namespace) -> ArbitrationSettings:
    """Defaults, then the --config file, then the flags given."""
    values: dict[str, Any] = {}
    if args.config is not None:
        values.update(_read_config(args.config))
    for field in dataclasses.fields(ArbitrationSettings):
        given = getattr(args, field.name, None)
        if given is not None:
            values[field.name] = given
    return ArbitrationSettings(**values)


def _read_config(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"--config {path}: {e}") from None
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise ConfigError(f"--config {path}: expected a mapping of settings, got {type(doc).__name__}")
    unknown = sorted(set(doc) - set(_CONFIG_KEYS))
    if unknown:
        raise ConfigError(f"--config {path}: unknown keys {', '.join(unknown)}; known: {', '.join(_CONFIG_KEYS)}")
    out: dict[str, Any] = {}
    for key, value in doc.items():
        field = _CONFIG_KEYS[key]
        if field.endswith("namespaces"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"--config {path}: {key} must be a list of namespace names")
            out[field] = tuple(value)
            continue
        if field == "dry_run" and not isinstance(value, bool):
            raise ConfigError(f"--config {path}: {key} must be true or false")
        elif field != "dry_run" and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ConfigError(f"--config {path}: {key} must be a number, got {value!r}")
        out[field] = value
    return out


def settings_from(args: argparse.Namespace) -> descheduler.DeschedulerSettings:
    """The validated settings; raises ConfigError for flags that cannot work."""
    settings = descheduler.DeschedulerSettings(
        client=ClientSettings.from_args(args, user_agent="tessera-descheduler"),
        serving=servingflags.settings_from(args),
        leader_election=leaderelectionflags.settings_from(args),
        migration=MigrationSettings(default_ttl=args.default_ttl, resync=args.resync),
        arbitration=arbitration_from(args),
        defrag=DefragSettings(
            scheduler_address=args.scheduler_address,
            interval=args.defrag_interval,
            min_pending=args.defrag_min_pending,
            max_migrations=args.defrag_max_migrations,
        ),
    )
    settings.validate()
    return settings


def run(args: argparse.Namespace) -> int:
    """Flags that cannot work raise ConfigError: `tessera descheduler: reason`, exit code 2."""
    try:
        return descheduler.run(settings_from(args))
    except OSError as e:
        print(f"tessera descheduler: cannot serve on {args.listen}: {e.strerror or e}", file=sys.stderr)
        return 1
