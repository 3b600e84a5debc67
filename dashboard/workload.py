"""What waits and who shares: pending pods, gangs and the quota tree, as plain values.

Pure functions over parsed objects, the clock passed in, so tests pin every number. The
scheduler's view of a pending pod (its queue, attempts, the explanation chain) arrives from
`dashboard.sources` as `SchedulerView` values; without a scheduler the pod's own `PodScheduled`
message stands in. Quota runtime and usage are never computed here: they are what the
controller wrote (`quota.scheduling.koordinator.sh/runtime`, `/allocated` annotations and
`status.used`), or None, shown as "—".
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from apis.crds.elasticquota import ElasticQuota
from apis.crds.podgroup import PodGroup
from apis.errors import AnnotationError
from apis.extension import devicetypes, gang, names, quota, quotacount
from apis.k8s import resources
from apis.k8s.core import Pod
from dashboard.explanation import Step

__all__ = [
    "Gang",
    "PendingPod",
    "QuotaNode",
    "SchedulerView",
    "age_seconds",
    "epoch_seconds",
    "gangs",
    "pending",
    "quota_tree",
    "request_summary",
]

#: Resources shown on quota bars and pod requests, in this order (others follow by name).
_KOORDINATOR = f"{names.DOMAIN}/"
_SHOWN_FIRST = (names.GPU_CORE, names.GPU_MEMORY_RATIO, names.NVIDIA_GPU, names.CPU, names.MEMORY)


@dataclass(frozen=True, slots=True)
class SchedulerView:
    """What the scheduler says about one pending pod."""

    queue: str = ""
    attempts: int = 0
    message: str = ""
    steps: tuple[Step, ...] = ()
    #: Some node could take the pod now (the scheduler's `Explain` lists where).
    fits: bool = False


@dataclass(frozen=True, slots=True)
class PendingPod:
    pod: str  # namespace/name
    age_seconds: float
    asks: str
    gang: str  # namespace/name, or ""
    quota: str  # the quota it is charged to, or ""
    queue: str
    attempts: int
    message: str
    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class Gang:
    name: str  # namespace/name
    min_member: int | None  # None when neither annotation nor PodGroup says
    bound: int
    waiting: int
    waiting_seconds: float  # since the oldest waiting member was created; 0 with none waiting
    phase: str  # the PodGroup's phase, or "" for annotation-only gangs


@dataclass(frozen=True, slots=True)
class QuotaNode:
    name: str  # namespace/name
    parent: str  # the parent quota's name ("" for a root)
    depth: int
    is_parent: bool
    min: resources.ResourceList
    max: resources.ResourceList
    runtime: resources.ResourceList | None
    used: resources.ResourceList | None
    #: Annotations that could not be read, `key: reason`.
    problems: tuple[str, ...] = field(default_factory=tuple)


def epoch_seconds(timestamp: str) -> float | None:
    """An RFC 3339 timestamp (`2026-11-24T18:00:00Z`) as seconds since the epoch; None for ''
    or unreadable. A time without a zone is UTC."""
    if not timestamp:
        return None
    try:
        then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=datetime.UTC)
    return then.timestamp()


def age_seconds(timestamp: str, now: datetime.datetime) -> float:
    """Seconds since an RFC 3339 timestamp; 0 for '' or unreadable."""
    then = epoch_seconds(timestamp)
    return 0.0 if then is None else max(0.0, now.timestamp() - then)


def request_summary(requests: Mapping[str, int]) -> str:
    """`gpu-core=50 gpu-memory-ratio=50 cpu=500m` for people: device and CPU/memory requests."""
    shown = [n for n in _SHOWN_FIRST if n in requests]
    shown += sorted(n for n in requests if n in devicetypes.RESOURCE_NAMES and n not in shown)
    return " ".join(f"{n.removeprefix(_KOORDINATOR)}={resources.format_quantity(n, requests[n])}" for n in shown)


def _gang_name(pod: Pod) -> str:
    try:
        spec = gang.gang_from_pod(pod)
    except AnnotationError:
        return ""
    return spec.name if spec is not None else ""


def pending(
    pods: Iterable[Pod], *, now: datetime.datetime, scheduler: Mapping[str, SchedulerView]
) -> tuple[PendingPod, ...]:
    """Pods no node holds yet, oldest first, each with what the scheduler says about it (by
    `namespace/name` in `scheduler`), else its own `PodScheduled` message."""
    out = []
    for pod in pods:
        if pod.node_name or pod.is_terminal or pod.is_deleting:
            continue
        view = scheduler.get(pod.key, SchedulerView())
        gang_name = _gang_name(pod)
        steps = view.steps
        if view.fits and gang_name:
            # It fits on its own, so what holds a gang member is its gang: all or nothing.
            steps = (Step("gang", "Coscheduling", f"fits on its own; waits for the rest of gang {gang_name}"), *steps)
        out.append(
            PendingPod(
                pod=pod.key,
                age_seconds=age_seconds(pod.meta.creation_timestamp, now),
                asks=request_summary(pod.requests()),
                gang=gang_name,
                quota=quota.pod_quota_name(pod) or "",
                queue=view.queue,
                attempts=view.attempts,
                message=view.message or pod.pending_message,
                steps=steps,
            )
        )
    return tuple(sorted(out, key=lambda p: (-p.age_seconds, p.pod)))


def gangs(pods: Iterable[Pod], groups: Iterable[PodGroup], *, now: datetime.datetime) -> tuple[Gang, ...]:
    """Every gang with members or a PodGroup: members bound and waiting, and for how long the
    oldest waiting member has waited. `min_member` comes from the PodGroup, else the members'
    `min-available` annotation."""
    # A PodGroup of each API group may share a name; the members' kind says which is theirs.
    by_group = {(g.upstream, g.meta.key): g for g in groups}
    members: dict[str, list[Pod]] = {key: [] for _, key in by_group}
    upstream: dict[str, bool] = {key: kind for kind, key in by_group}
    minimum: dict[str, int] = {}
    for pod in pods:
        if pod.is_terminal:
            continue
        try:
            spec = gang.gang_from_pod(pod)
        except AnnotationError:
            continue
        if spec is None:
            continue
        members.setdefault(spec.name, []).append(pod)
        upstream[spec.name] = spec.upstream
        if spec.min_available is not None:
            minimum[spec.name] = spec.min_available
    out = []
    for name, pods_of in members.items():
        group = by_group.get((upstream.get(name, False), name))
        waiting = [p for p in pods_of if not p.node_name]
        oldest = max((age_seconds(p.meta.creation_timestamp, now) for p in waiting), default=0.0)
        out.append(
            Gang(
                name=name,
                min_member=group.min_member if group is not None else minimum.get(name),
                bound=len(pods_of) - len(waiting),
                waiting=len(waiting),
                waiting_seconds=oldest,
                phase=group.phase.value if group is not None else "",
            )
        )
    return tuple(sorted(out, key=lambda g: (-g.waiting_seconds, g.name)))


def quota_tree(quotas: Sequence[ElasticQuota]) -> tuple[QuotaNode, ...]:
    """The quotas in tree order (depth first, children by name), each with its depth.

    A quota whose parent is not among `quotas` (the implicit root, or one not created yet) is
    a root here; so is the first, by name, of quotas whose parent labels form a cycle.
    `runtime` is the controller's `runtime` annotation; `used` is `status.used`, else the
    `allocated` annotation, else None.
    """
    by_name = {q.meta.name: q for q in quotas}
    children: dict[str, list[ElasticQuota]] = {}
    roots: list[ElasticQuota] = []
    parents: dict[str, str] = {}
    problems: dict[str, list[str]] = {}
    for q in quotas:
        try:
            parent = quota.tree_info(q).parent
        except AnnotationError as e:
            problems.setdefault(q.meta.key, []).append(str(e))
            parent = quota.ROOT_QUOTA_NAME
        if parent in by_name and parent != q.meta.name:
            children.setdefault(parent, []).append(q)
            parents[q.meta.name] = parent
        else:
            roots.append(q)
    out: list[QuotaNode] = []
    drawn: set[str] = set()

    def visit(q: ElasticQuota, depth: int, path: frozenset[str]) -> None:
        drawn.add(q.meta.name)
        runtime = _annotation(q, names.ANNOTATION_QUOTA_RUNTIME, problems)
        allocated = _annotation(q, names.ANNOTATION_QUOTA_ALLOCATED, problems)
        kids = sorted(children.get(q.meta.name, ()), key=lambda c: c.meta.name)
        out.append(
            QuotaNode(
                name=q.meta.key,
                parent=parents.get(q.meta.name, ""),
                depth=depth,
                is_parent=bool(kids) or q.meta.labels.get(names.LABEL_QUOTA_IS_PARENT) == "true",
                min=quotacount.counted(q.min),  # in the names runtimes are in (nvidia.com/gpu as percent)
                max=quotacount.counted(q.max),
                runtime=runtime,
                used=dict(q.used) if q.used else allocated,
                problems=tuple(problems.get(q.meta.key, ())),
            )
        )
        for child in kids:
            if child.meta.name not in path:  # a cycle in the labels: shown once, not forever
                visit(child, depth + 1, path | {child.meta.name})

    for root in sorted(roots, key=lambda q: q.meta.name):
        visit(root, 0, frozenset({root.meta.name}))
    for q in sorted(quotas, key=lambda q: q.meta.name):  # a cycle in the parent labels: no root reaches it
        if q.meta.name not in drawn:
            visit(q, 0, frozenset({q.meta.name}))
    return tuple(out)


def _annotation(q: ElasticQuota, key: str, problems: dict[str, list[str]]) -> resources.ResourceList | None:
    text = q.meta.annotations.get(key)
    if not text:
        return None
    try:
        return quota.decode_resource_annotation(key, text, obj=q.meta.key)
    except AnnotationError as e:
        problems.setdefault(q.meta.key, []).append(str(e))
        return None
