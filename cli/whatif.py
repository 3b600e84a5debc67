"""`tessera what-if -f SNAPSHOT.yaml`: schedule pods from YAML snapshots, without a cluster.

Reads Nodes, Device CRs and Pods (multi-document YAML or `List`s, as `kubectl get -o yaml`
writes them), schedules every pod without `spec.nodeName` in order with the scheduler's own
core, and prints per pod the node and the `device-allocated` annotation (GPUs that NVLink joins
marked `(NVLink)`), or why it fits nowhere (or why it was not scheduled at all: a
`schedulerName` that no profile of `--config` serves).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import yaml

from apis.crds.device import DeviceType
from apis.errors import AnnotationError, ConfigError, ValidationError
from apis.extension import allocation
from apis.k8s import resources
from scheduler import fragmentation, whatif
from scheduler.cache import PodInfo
from scheduler.core import (
    BALANCED_FGD,
    FGD,
    FGD_CHOICES,
    SCORING_CHOICES,
    Scheduler,
    with_elastic_quota,
    with_scoring_choice,
)
from scheduler.framework.config import SchedulerConfig, load_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f", "--filename", action="append", required=True, metavar="FILE", help="YAML snapshot ('-' for stdin)"
    )
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")
    parser.add_argument(
        "--scoring",
        choices=SCORING_CHOICES,
        help=f"scoring strategy of NodeResourcesFit and DeviceShare (spread or pack), {FGD} (fragmentation "
        f"gradient descent) or {BALANCED_FGD} (FGD plus CPU/memory balance), against the snapshot's own mix of "
        f"pod shapes (default {BALANCED_FGD}, the scheduler's, unless --config is given)",
    )
    parser.add_argument("--config", metavar="FILE", help="scheduler configuration (YAML)")
    parser.add_argument("--seed", type=int, default=0, help="seed for breaking score ties")


def run(args: argparse.Namespace) -> int:
    try:
        docs: list[object] = []
        for name in args.filename:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
            docs.extend(yaml.safe_load_all(text))
        snapshot = whatif.parse_objects(docs, source=",".join(args.filename))
        config = load_config(Path(args.config).read_text(encoding="utf-8")) if args.config else SchedulerConfig()
        # Without --scoring or --config: the scheduler's default, BalancedFGD, measured against
        # the snapshot's own mix (a fresh scheduler would start from an empty learned one).
        scoring = args.scoring or (None if args.config else BALANCED_FGD)
        if scoring:
            pods = (PodInfo.of(p) for p in snapshot.pods if not p.is_terminal)
            workload = fragmentation.workload_of(pods) if scoring in FGD_CHOICES else ()
            config = with_scoring_choice(config, scoring, workload)
        if snapshot.quotas:
            config = with_elastic_quota(config)
        scheduler = Scheduler(config, seed=args.seed)
    except (OSError, yaml.YAMLError, ValidationError, ConfigError) as e:
        print(f"tessera what-if: {e}", file=sys.stderr)
        return 1
    if snapshot.ignored:
        kinds = ", ".join(sorted(set(snapshot.ignored)))
        print(f"tessera what-if: ignoring objects of kind {kinds}", file=sys.stderr)
    report = whatif.report(snapshot, scheduler)
    if args.output == "json":
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(render_table(list(report.results)))
        if report.gangs:
            print(render_gangs(report.gangs))
        if report.reservations:
            print(render_reservations(report.reservations))
    return 0


def render_table(results: list[whatif.WhatIfResult]) -> str:
    if not results:
        return "no pending pods in the snapshot"
    width = max(len("POD"), *(len(r.pod) for r in results))
    node_width = max(len("NODE"), *(len(r.node or "-") for r in results))
    lines = [f"{'POD':<{width}}  {'NODE':<{node_width}}  DEVICES / REASON"]
    indent = " " * (width + node_width + 4)
    for r in results:
        if r.node is not None:
            devices = _devices(r.annotations, nvlink=bool(r.nvlink)) or "-"
            if r.partition:
                devices += f"; partition {r.partition}"
            lines.append(f"{r.pod:<{width}}  {r.node:<{node_width}}  {devices}")
            continue
        lines.append(f"{r.pod:<{width}}  {'-':<{node_width}}  {r.reason or r.message}")
        grouped = Counter(reason for reasons in r.reasons.values() for reason in reasons)
        for reason, count in sorted(grouped.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"{indent}{count} node{'s' if count != 1 else ''}: {reason}")
        for node, shortfalls in r.nearest:
            lines.append(f"{indent}nearest {node}: {'; '.join(str(s) for s in shortfalls)}")
    return "\n".join(lines)


def render_gangs(gangs: tuple[whatif.GangResult, ...]) -> str:
    """One line per gang: `GANG  PLACED/MIN  SATISFIED  REASON`."""
    width = max(len("GANG"), *(len(g.name) for g in gangs))
    lines = ["", f"{'GANG':<{width}}  PLACED/MIN  SATISFIED  REASON"]
    for g in gangs:
        lines.append(
            f"{g.name:<{width}}  {f'{g.placed}/{g.min}':<10}  {'yes' if g.satisfied else 'no':<9}  {g.reason or '-'}"
        )
    return "\n".join(lines)


def render_reservations(reservations: tuple[whatif.ReservationResult, ...]) -> str:
    """One line per Reservation: `RESERVATION  PHASE  NODE  HOLDS / REASON`."""
    width = max(len("RESERVATION"), *(len(r.name) for r in reservations))
    lines = ["", f"{'RESERVATION':<{width}}  {'PHASE':<9}  {'NODE':<12}  HOLDS / REASON"]
    for r in reservations:
        holds = " ".join(f"{k}={v}" for k, v in r.allocatable.items())
        if r.pre_allocated and not r.message:
            holds += f" (pre-allocated from {', '.join(r.pre_allocated)})"
        lines.append(f"{r.name:<{width}}  {r.phase:<9}  {r.node or '-':<12}  {r.message or holds or '-'}")
    return "\n".join(lines)


def _devices(annotations: Mapping[str, str], *, nvlink: bool = False) -> str:
    """`gpu 3 [gpu-core=50 gpu-memory=40Gi gpu-memory-ratio=50]` per allocated device; with
    `nvlink`, ` (NVLink)` after the last GPU."""
    try:
        allocs = allocation.from_pod_annotations(annotations)
    except AnnotationError as e:
        return f"(unreadable annotation: {e})"
    parts = []
    for dtype, entries in sorted(allocs.items(), key=lambda kv: kv[0].value):
        for a in entries:
            res = " ".join(
                f"{name.rsplit('/', 1)[-1]}={resources.format_quantity(name, amount)}"
                for name, amount in sorted(a.resources.items())
            )
            vfs = "".join(f" vf {vf.bus_id or vf.minor}" for vf in a.vfs)
            parts.append(f"{dtype.value} {a.minor} [{res}]{vfs}")
        if nvlink and dtype is DeviceType.GPU:
            parts[-1] += " (NVLink)"
    return ", ".join(parts)
