"""`tessera deschedule [--dry-run] [-n NS] [POD]`: which pods to move, and where, so a pending pod fits.

Prints the GPU defragmentation plan for a pending pod (or for every pending pod): the fewest
bound pods to migrate, in order, where each one's replacement goes, the node that is freed and
how many GPUs it then has free. From the live scheduler (its gRPC `PlanMigrations`, reached as
`tessera explain` reaches it), or offline from YAML snapshots (`--snapshot FILE`, read as
`tessera what-if` reads them: each pending pod planned alone against the snapshot's placed pods).

It never moves anything itself: executing a plan safely (a Reservation for each replacement
first, then the eviction, within the rate and disruption limits) is the descheduler's job,
through PodMigrationJobs. `--apply` creates those jobs for the plans found (`cli.deschedule_apply`);
otherwise, without `--dry-run`, it says after the plan that nothing was moved.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

import grpc
import yaml

from apis.errors import ConfigError, ValidationError
from apis.k8s.core import Pod
from cli import deschedule_apply, schedulerclient
from kube import errors
from kube.client import Client, ClientSettings
from proto.scheduler.v1 import scheduler_pb2 as pb
from proto.scheduler.v1 import scheduler_pb2_grpc
from scheduler import defrag, whatif
from scheduler.core import Scheduler
from scheduler.framework.config import SchedulerConfig, load_config
from scheduler.service import ADDRESS_ENV

_NOT_EXECUTED = (
    "tessera deschedule only plans; nothing was moved. The descheduler (tessera descheduler) executes "
    "migrations safely as PodMigrationJobs."
)


class _Failed(Exception):
    """A request that cannot be answered: the message is for the user."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "pod", nargs="?", metavar="POD", help="the pending pod (NAME or NAMESPACE/NAME); without it, every pending pod"
    )
    parser.add_argument("-n", "--namespace", help="the pod's namespace (default: default; without POD: all)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default: see below)")
    mode.add_argument(
        "--apply",
        action="store_true",
        help="also create a PodMigrationJob per migration, for the descheduler to execute (needs the API server)",
    )
    parser.add_argument(
        "--snapshot",
        action="append",
        metavar="FILE",
        help="plan offline against YAML snapshots ('-' for stdin), as `tessera what-if` reads them",
    )
    parser.add_argument("--config", metavar="FILE", help="scheduler configuration for --snapshot (YAML)")
    parser.add_argument(
        "--max-migrations",
        type=int,
        default=defrag.DEFAULT_MAX_MIGRATIONS,
        metavar="N",
        help=f"at most N pods moved per pending pod (default {defrag.DEFAULT_MAX_MIGRATIONS})",
    )
    parser.add_argument(
        "--exclude", action="append", default=[], metavar="NAMESPACE/NAME", help="a pod the plan must not move"
    )
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")
    # A search that finds nothing looks at up to 256 nodes: seconds on a large, full cluster.
    schedulerclient.add_arguments(parser, timeout=60.0)
    ClientSettings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.max_migrations < 1:
        print(f"tessera deschedule: --max-migrations must be at least 1, got {args.max_migrations}", file=sys.stderr)
        return 2
    if args.apply and args.snapshot:
        print("tessera deschedule: --apply acts on the live cluster, not on --snapshot", file=sys.stderr)
        return 2
    options = defrag.PlanOptions(max_migrations=args.max_migrations, exclude=frozenset(args.exclude))
    try:
        plans = _offline(args, options) if args.snapshot else _live(args, options)
    except _Failed as e:
        print(f"tessera deschedule: {e}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps({"plans": [p.to_dict() for p in plans]}, indent=2))
    else:
        print(render(plans))
    if args.apply:
        return _apply(args, plans)
    if not args.dry_run:
        print(_NOT_EXECUTED, file=sys.stderr)
    return 0


def _apply(args: argparse.Namespace, plans: list[defrag.MigrationPlan]) -> int:
    """Hand the plans to the descheduler; what was requested goes to stderr (stdout is the plan)."""
    with Client.from_settings(ClientSettings.from_args(args, user_agent="tessera-deschedule")) as client:
        try:
            requested = deschedule_apply.request(client, plans)
        except errors.APIError as e:
            print(f"tessera deschedule: cannot create PodMigrationJobs on {client.host}: {e}", file=sys.stderr)
            return 1
    for r in requested:
        verb = "created" if r.created else "already exists"
        print(f"podmigrationjob/{r.job} {verb} (moves {r.pod})", file=sys.stderr)
    if not requested:
        print("no migrations to request", file=sys.stderr)
    return 0


def _target(args: argparse.Namespace) -> tuple[str, str] | None:
    """(namespace, name) of the pod asked for, or None for every pending pod."""
    if not args.pod:
        return None
    namespace, _, name = args.pod.rpartition("/")
    return namespace or args.namespace or "default", name


# --- live ----------------------------------------------------------------------------------------------
def _live(args: argparse.Namespace, options: defrag.PlanOptions) -> list[defrag.MigrationPlan]:
    try:
        endpoint = schedulerclient.address(args)
        channel = schedulerclient.connect(endpoint, args)
    except (ConfigError, OSError) as e:
        raise _Failed(str(e)) from None
    target = _target(args)
    with channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)  # type: ignore[no-untyped-call]  # generated, untyped
        try:
            if target is not None:
                return [_ask(stub, *target, options, args.timeout)]
            pending = stub.ListPending(pb.ListPendingRequest(namespace=args.namespace or ""), timeout=args.timeout)
            plans = (_ask_if_pending(stub, *_split(p.pod), options, args.timeout) for p in pending.pods)
            return [p for p in plans if p is not None]
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                raise _Failed(str(e.details())) from None
            raise _Failed(
                f"the scheduler at {endpoint} did not answer: {e.details()} "
                f"(point at it with --scheduler ADDRESS or ${ADDRESS_ENV})"
            ) from None


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.rpartition("/")
    return namespace, name


def _ask_if_pending(
    stub: scheduler_pb2_grpc.SchedulerStub, namespace: str, name: str, options: defrag.PlanOptions, timeout: float
) -> defrag.MigrationPlan | None:
    """`_ask`, or None for a pod bound or gone since it was listed."""
    try:
        return _ask(stub, namespace, name, options, timeout)
    except grpc.RpcError as e:
        if e.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
            return None
        raise


def _ask(
    stub: scheduler_pb2_grpc.SchedulerStub, namespace: str, name: str, options: defrag.PlanOptions, timeout: float
) -> defrag.MigrationPlan:
    request = pb.PlanMigrationsRequest(
        namespace=namespace, name=name, max_migrations=options.max_migrations, exclude=sorted(options.exclude)
    )
    response = stub.PlanMigrations(request, timeout=timeout)
    return defrag.MigrationPlan(
        pod=f"{namespace}/{name}",
        feasible=response.feasible,
        node=response.node or None,
        migrations=tuple(
            defrag.Migration(m.pod, m.uid, m.from_node, m.to_node, m.gpu_percent) for m in response.migrations
        ),
        message=response.message,
        freed_gpus=response.freed_gpus,
    )


# --- offline -------------------------------------------------------------------------------------------
def _offline(args: argparse.Namespace, options: defrag.PlanOptions) -> list[defrag.MigrationPlan]:
    try:
        docs: list[object] = []
        for name in args.snapshot:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
            docs.extend(yaml.safe_load_all(text))
        snapshot = whatif.parse_objects(docs, source=",".join(args.snapshot))
        config = load_config(Path(args.config).read_text(encoding="utf-8")) if args.config else SchedulerConfig()
        Scheduler(config)  # a bad configuration fails here, once, not per pod
    except (OSError, yaml.YAMLError, ValidationError, ConfigError) as e:
        raise _Failed(str(e)) from None
    pending, _ = whatif.load(snapshot, Scheduler(config))
    chosen = _chosen(pending, _target(args), args.namespace)
    plans = []
    for pod in chosen:
        scheduler = Scheduler(config)  # each pod planned alone, against the snapshot as it is
        whatif.load(snapshot, scheduler)
        plans.append(defrag.plan(scheduler, pod, options))
    return plans


def _chosen(pending: Iterable[Pod], target: tuple[str, str] | None, namespace: str | None) -> list[Pod]:
    pods = list(pending)
    if target is None:
        return [p for p in pods if namespace is None or p.namespace == namespace]
    key = "/".join(target)
    found = [p for p in pods if p.key == key]
    if not found:
        raise _Failed(f"pod {key} is not a pending pod of the snapshot")
    return found[:1]


# --- output --------------------------------------------------------------------------------------------
def render(plans: list[defrag.MigrationPlan]) -> str:
    """Per pending pod: one line saying what the plan does (or why there is none), then its moves."""
    if not plans:
        return "no pending pods"
    lines: list[str] = []
    for plan in plans:
        if lines:
            lines.append("")
        verdict = plan.message if plan.feasible else f"no plan: {plan.message}"
        lines.append(f"{plan.pod}: {verdict}")
        if not plan.migrations:
            continue
        rows = [("MOVE", "FROM", "TO", "GPU")]
        rows += [(m.pod, m.from_node, m.to_node, f"{m.gpu_percent}%") for m in plan.migrations]
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for i, row in enumerate(rows):
            number = "#" if i == 0 else str(i)
            cells = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            lines.append(f"  {number:<2} {cells}")
        lines.append(f"  frees {plan.node}: {plan.freed_gpus} GPUs free there after the moves")
    return "\n".join(lines)
