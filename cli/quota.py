"""`tessera quota [-n NS] [-o table|json] [--resume-reclaim]`: the ElasticQuota tree as the
controller sees it.

Reads the ElasticQuotas from the API server and prints, per quota and resource, min and max (the
spec, in the names quotas count: `nvidia.com/gpu: 2` shows as `gpu-core` and `gpu-memory-ratio`
200, `apis.extension.quotacount`), runtime and request (the annotations `tessera controller`
writes, Koordinator's names) and used (`status.used`). It computes nothing itself: a quota whose
annotations are missing (no controller has written them yet) shows `-` there and a note says so.
The tree comes from the `parent` labels, children indented under their parent; GPU resources are
listed first. When the controller's reclaim is paused by its circuit breaker (the quotas'
`ReclaimPaused` condition), a note says why and since when. `-n NS` shows the quotas of one
namespace with the quotas above them; `-o json` prints `{"quotas": [{"name", "namespace",
"parent", "min", "max", "request", "runtime", "used"}], "notes": [...], "reclaimPaused": null |
{"reason", "message", "since"}}` (the shape of `tessera what-if`'s `quotas`, `runtime` and
`request` null when not written), quotas in tree order, quantities as Kubernetes strings.

`--resume-reclaim` is the operator's word that reclaim may evict again: it writes
`tessera.dev/resume-quota-reclaim: <now>` on one quota that shows the pause (the controller
resumes when it sees a time not before the pause began) and prints which.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from apis.crds.elasticquota import ElasticQuota
from apis.errors import AnnotationError, ConfigError, TesseraError
from apis.extension import devicetypes, names, quotacount
from apis.extension import quota as quota_labels
from apis.k8s import resources
from apis.k8s.meta import now_rfc3339
from controller.quotas.status import CONDITION_RECLAIM_PAUSED, CONDITION_VALID
from kube import errors
from kube.client import Client, ClientSettings
from kube.resources import NAMESPACES

__all__ = ["Paused", "QuotaRow", "add_arguments", "paused_of", "render_table", "rows_of", "run", "to_json"]

#: Listed first, in this order; then any other resource by name.
_GPU_FIRST: Final = (
    names.GPU_CORE,
    names.GPU_MEMORY_RATIO,
    names.GPU_MEMORY,
    names.KOORD_GPU,
    *devicetypes.WHOLE_GPU_RESOURCES,
    names.GPU_SHARED,
    names.RDMA,
)
_FIGURES: Final = ("min", "max", "runtime", "used", "request")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    ClientSettings.add_arguments(parser)
    parser.add_argument("-n", "--namespace", default="", help="only the quotas of this namespace (and those above)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument(
        "--resume-reclaim",
        action="store_true",
        help="tell the controller that quota reclaim, paused by its circuit breaker, may evict again",
    )


@dataclass(frozen=True, slots=True)
class QuotaRow:
    """One quota as printed; `runtime`/`request` are None where the controller has not written them."""

    name: str
    namespace: str
    parent: str
    depth: int
    min: dict[str, int]
    max: dict[str, int]
    used: dict[str, int]
    runtime: dict[str, int] | None
    request: dict[str, int] | None
    #: Why the quota is not usable as it is (`Valid=False` condition, or a bad annotation).
    problem: str = ""

    def resources(self) -> list[str]:
        """The quota's resources (those of min or max), GPU resources first."""
        return sort_resources({*self.min, *self.max})

    def to_dict(self) -> dict[str, Any]:
        def show(amounts: Mapping[str, int] | None) -> dict[str, str] | None:
            return None if amounts is None else resources.format_list(amounts)

        return {
            "name": self.name,
            "namespace": self.namespace,
            "parent": self.parent,
            "min": show(self.min),
            "max": show(self.max),
            "request": show(self.request),
            "runtime": show(self.runtime),
            "used": show(self.used),
        }


@dataclass(frozen=True, slots=True)
class Paused:
    """Reclaim paused by the controller's circuit breaker, as a quota's condition says."""

    reason: str
    message: str
    since: str
    #: The quota it was read from (`namespace/name`).
    quota: str

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "since": self.since}


def paused_of(quotas: Sequence[ElasticQuota]) -> Paused | None:
    """The pause the quotas show (from the first by namespace/name that carries it), or None."""
    for quota in sorted(quotas, key=lambda q: q.meta.key):
        for c in quota.conditions:
            if c.type == CONDITION_RECLAIM_PAUSED and c.status == "True":
                return Paused(c.reason, c.message, c.last_transition_time, quota.meta.key)
    return None


def sort_resources(found: set[str] | Sequence[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(_GPU_FIRST)}
    return sorted(found, key=lambda r: (rank.get(r, len(rank)), r))


def rows_of(quotas: Sequence[ElasticQuota], namespace: str = "") -> tuple[list[QuotaRow], list[str]]:
    """The rows in tree order (depth first, children by name) and the notes to print below."""
    by_name = {q.meta.name: q for q in quotas}
    children: dict[str, list[str]] = {}
    tops: list[str] = []
    for q in quotas:
        parent = _parent(q)
        (children.setdefault(parent, []) if parent in by_name else tops).append(q.meta.name)
    wanted = _with_ancestors(quotas, by_name, namespace)
    rows: list[QuotaRow] = []
    notes: list[str] = []
    seen: set[str] = set()

    def walk(name: str, depth: int) -> None:
        if name in seen:
            return
        seen.add(name)
        if name in wanted:
            rows.append(_row(by_name[name], depth))
        for child in sorted(children.get(name, ())):
            walk(child, depth + 1)

    for name in sorted(tops):
        walk(name, 0)
    for name in sorted(set(by_name) - seen):  # a cycle: parents that name each other
        walk(name, 0)
    missing = [r.name for r in rows if r.runtime is None or r.request is None]
    if missing:
        notes.append(
            f"no runtime/request written yet for {', '.join(missing)}: `tessera controller` writes them "
            "(is it running?)"
        )
    notes.extend(f"{r.name}: {r.problem}" for r in rows if r.problem)
    paused = paused_of(quotas)
    if paused is not None:
        notes.append(
            f"quota reclaim is PAUSED since {paused.since} ({paused.reason}): {paused.message}. "
            "No pod is evicted for its quota until the figures are stable again; "
            "`tessera quota --resume-reclaim` resumes it now"
        )
    return rows, notes


def _parent(quota: ElasticQuota) -> str:
    return quota.meta.labels.get(names.LABEL_QUOTA_PARENT) or quota_labels.ROOT_QUOTA_NAME


def _with_ancestors(quotas: Sequence[ElasticQuota], by_name: Mapping[str, ElasticQuota], namespace: str) -> set[str]:
    if not namespace:
        return set(by_name)
    wanted: set[str] = set()
    for q in quotas:
        if q.meta.namespace != namespace:
            continue
        name = q.meta.name
        while name in by_name and name not in wanted:
            wanted.add(name)
            name = _parent(by_name[name])
    return wanted


def _row(quota: ElasticQuota, depth: int) -> QuotaRow:
    problems: list[str] = []

    def annotation(key: str) -> dict[str, int] | None:
        text = quota.meta.annotations.get(key)
        if text is None:
            return None
        try:
            return quota_labels.decode_resource_annotation(key, text, obj=quota.meta.key)
        except AnnotationError as e:
            problems.append(str(e))
            return None

    runtime = annotation(names.ANNOTATION_QUOTA_RUNTIME)
    request = annotation(names.ANNOTATION_QUOTA_REQUEST)
    broken = [c for c in quota.conditions if c.type == CONDITION_VALID and c.status == "False"]
    problems += [f"{c.reason}: {c.message}" for c in broken]
    return QuotaRow(
        name=quota.meta.name,
        namespace=quota.meta.namespace,
        parent=_parent(quota),
        depth=depth,
        min=quotacount.counted(quota.min),
        max=quotacount.counted(quota.max),
        used=dict(quota.used),
        runtime=runtime,
        request=request,
        problem="; ".join(problems),
    )


def render_table(rows: Sequence[QuotaRow], notes: Sequence[str]) -> str:
    """One line per quota and resource; the quota's name (indented by depth) on its first line."""
    header = ("QUOTA", "NAMESPACE", "RESOURCE", *(f.upper() for f in _FIGURES))
    lines: list[tuple[str, ...]] = [header]
    for row in rows:
        first = True
        for resource in row.resources() or ["-"]:
            cells = [_quantity(resource, getattr(row, figure)) if resource != "-" else "-" for figure in _FIGURES]
            name = "  " * row.depth + row.name if first else ""
            lines.append((name, row.namespace if first else "", resource, *cells))
            first = False
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    return "\n".join([*text, *(f"note: {n}" for n in notes)])


def _quantity(resource: str, amounts: Mapping[str, int] | None) -> str:
    if amounts is None:
        return "-"
    return resources.format_list({resource: amounts.get(resource, 0)})[resource]


def to_json(rows: Sequence[QuotaRow], notes: Sequence[str], paused: Paused | None = None) -> str:
    doc = {"quotas": [r.to_dict() for r in rows], "notes": list(notes)}
    return json.dumps({**doc, "reclaimPaused": paused.to_dict() if paused else None}, indent=2, sort_keys=True)


def _resume(client: Client, quotas: Sequence[ElasticQuota]) -> int:
    paused = paused_of(quotas)
    if paused is None:
        print("quota reclaim is not paused: nothing to resume")
        return 0
    namespace, _, name = paused.quota.partition("/")
    now = now_rfc3339()
    patch = {"metadata": {"annotations": {names.ANNOTATION_QUOTA_RESUME_RECLAIM: now}}}
    try:
        client.resource(names.ELASTIC_QUOTAS).patch(name, patch, namespace=namespace)
    except errors.APIError as e:
        print(f"tessera quota: cannot annotate elasticquota/{name} -n {namespace}: {e}", file=sys.stderr)
        return 1
    print(
        f"elasticquota/{name} -n {namespace} annotated {names.ANNOTATION_QUOTA_RESUME_RECLAIM}={now}: the controller "
        f"resumes quota reclaim (paused since {paused.since}, {paused.reason}) when it sees it; every quota over its "
        "runtime then serves a whole grace period before any eviction"
    )
    return 0


def _read(client: Client, namespace: str) -> tuple[list[ElasticQuota], list[str]]:
    """Every ElasticQuota (the tree spans namespaces), and notes about those that do not parse."""
    if namespace:
        try:
            client.resource(NAMESPACES).get(namespace)
        except errors.NotFound:
            raise ConfigError(f"namespace {namespace!r} not found") from None
    try:
        items = client.resource(names.ELASTIC_QUOTAS).list_all().items
    except errors.NotFound:
        raise ConfigError("the ElasticQuota CRD is not installed in this cluster (deploy/crds/)") from None
    quotas: list[ElasticQuota] = []
    notes: list[str] = []
    for raw in items:
        try:
            quotas.append(ElasticQuota.from_dict(raw))
        except TesseraError as e:
            meta = raw.get("metadata") or {}
            notes.append(f"{meta.get('namespace', '')}/{meta.get('name', '')} does not parse: {e}")
    return quotas, notes


def run(args: argparse.Namespace) -> int:
    """0 with the tree (or a note that there are no quotas); 1 when the API server cannot be
    asked; a bad -n or a cluster without the CRD is a ConfigError (exit 2, cli.main)."""
    with Client.from_settings(ClientSettings.from_args(args, user_agent="tessera-quota")) as client:
        try:
            quotas, unreadable = _read(client, args.namespace)
            if args.resume_reclaim:
                return _resume(client, quotas)
        except errors.APIError as e:
            print(f"tessera quota: cannot list ElasticQuotas from {client.host}: {e}", file=sys.stderr)
            return 1
    rows, notes = rows_of(quotas, args.namespace)
    notes = [*notes, *unreadable]
    if args.output == "json":
        print(to_json(rows, notes, paused_of(quotas)))
        return 0
    if not rows:
        where = f" in namespace {args.namespace}" if args.namespace else ""
        print(f"No ElasticQuotas found{where}.", file=sys.stderr)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        return 0
    print(render_table(rows, notes))
    return 0
