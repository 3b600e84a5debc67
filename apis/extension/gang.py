"""Gang membership of a pod and a gang's settings, read the way Koordinator's Coscheduling reads
them (`apis/extension/coscheduling.go`, `pkg/scheduler/plugins/coscheduling/core/gang.go`). The
one parser for the scheduler, the quota manager, the descheduler, the dashboard and the soak.

Which gang (`namespace/name`), first found wins:
1. the `pod-group.scheduling.sigs.k8s.io` label: a PodGroup CR describes the gang
   (`spec_from_pod_group`: `spec.minMember`, `spec.scheduleTimeoutSeconds`, and the gang
   annotations below on the PodGroup);
2. the lightweight label `pod-group.scheduling.sigs.k8s.io/name` (scheduler-plugins'
   lightweight coscheduling, deprecated but still read by Koordinator);
3. the annotation `gang.scheduling.koordinator.sh/name`;
4. the label `scheduling.x-k8s.io/pod-group`: scheduler-plugins' PodGroup CR
   (`scheduling.x-k8s.io`) describes the gang, with the semantics scheduler-plugins'
   Coscheduling gives it (`spec_from_pod_group`, below).
In cases 2 and 3 the pod describes the gang (`spec_from_pod`); its min is the label
`pod-group.scheduling.sigs.k8s.io/min-available` if set, else the annotation `min-available`.
A pod that names one of Koordinator's gangs (1-3) and a scheduler-plugins PodGroup (4) is in no
gang: `gang_conflict` says why, the scheduler refuses it with that reason, and `gang_from_pod`
raises it (the quota manager then checks the pod alone).

A scheduler-plugins PodGroup's gang, as its Coscheduling reads it (`pkg/coscheduling/core`): min
`spec.minMember`; members wait `spec.scheduleTimeoutSeconds` (missing or 0: the plugin's
`permitWaitingTimeSeconds`, 60 s); a member that fails rejects the waiting ones (Strict); the
gang is allowed once min members are waiting or bound (`waiting-and-running`);
`spec.minResources` must fit in the cluster's free resources before any member is placed
(`GangSpec.min_resources`). Koordinator's gang annotations on it mean nothing, as there.

A value that cannot be used falls back to the default with a warning, kept in
`GangSpec.problems` (the scheduler makes each an Event), and only a gang whose size cannot be
known is invalid (`GangSpec.error`: its pods are unschedulable with that reason):
- min: required on the pod; not an integer → invalid; ≤ 0 → 0 (Koordinator keeps it: every
  member passes on its own), with a problem. A PodGroup's `minMember` ≤ 0 likewise.
- `total-number`: at least min; missing, malformed or smaller → min.
- `mode`: `Strict` (default) or `NonStrict`; anything else → Strict.
- `waiting-time`: a Go duration; missing or 0 → the default (600 s); malformed or negative → the
  default, with a problem. A PodGroup's `spec.scheduleTimeoutSeconds` ≤ 0 → the default.
- `groups`: a JSON list of `namespace/name`; malformed → the gang alone.
- `match-policy` (or `pod-group.scheduling.sigs.k8s.io/match-policy`): `only-waiting`,
  `waiting-and-running` or `once-satisfied` (default); anything else → the default.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from apis.crds.podgroup import PodGroup
from apis.errors import AnnotationError
from apis.extension import names
from apis.k8s.core import Pod
from apis.k8s.duration import parse_duration
from apis.k8s.resources import ResourceList

__all__ = [
    "DEFAULT_WAITING_SECONDS",
    "UPSTREAM_DEFAULT_WAITING_SECONDS",
    "GangMode",
    "GangSpec",
    "MatchPolicy",
    "gang_conflict",
    "gang_from_pod",
    "gang_name",
    "joins_pod_group",
    "joins_upstream_pod_group",
    "parse_duration",
    "spec_from_pod",
    "spec_from_pod_group",
]

DEFAULT_WAITING_SECONDS = 600.0
#: scheduler-plugins' Coscheduling `permitWaitingTimeSeconds` default.
UPSTREAM_DEFAULT_WAITING_SECONDS = 60.0
_EMPTY: Mapping[str, str] = {}


class GangMode(enum.Enum):
    STRICT = "Strict"  # one member failing rejects every waiting member of the group
    NON_STRICT = "NonStrict"  # members that fit keep their place


class MatchPolicy(enum.Enum):
    """Which members count towards min at Permit."""

    ONLY_WAITING = "only-waiting"
    WAITING_AND_RUNNING = "waiting-and-running"
    #: Waiting ones until the gang was once satisfied; after that every member passes.
    ONCE_SATISFIED = "once-satisfied"


@dataclass(frozen=True, slots=True)
class GangSpec:
    name: str  # `namespace/name`
    #: None only for a member of a PodGroup gang read without its PodGroup (`gang_from_pod`).
    min_available: int | None
    total_number: int | None
    mode: GangMode = GangMode.STRICT
    waiting_seconds: float = DEFAULT_WAITING_SECONDS
    #: Every gang that must be satisfied together, this one included, sorted.
    groups: tuple[str, ...] = ()
    match_policy: MatchPolicy = MatchPolicy.ONCE_SATISFIED
    from_pod_group: bool = False
    #: A scheduler-plugins PodGroup (`scheduling.x-k8s.io`) describes the gang.
    upstream: bool = False
    #: `spec.minResources` of a scheduler-plugins PodGroup: the free resources the cluster must
    #: have for the gang before any member is placed (empty: no check).
    min_resources: ResourceList = field(default_factory=dict)
    #: Values that were ignored for their default, one sentence each (warning events).
    problems: tuple[str, ...] = ()
    #: Why the gang cannot be formed at all ("" when it can).
    error: str = ""

    @property
    def group_id(self) -> str:
        """Koordinator's gang group id: the group's gang names, sorted, joined by commas."""
        return ",".join(self.groups)


def joins_pod_group(pod: Pod) -> bool:
    """Whether a PodGroup CR describes the pod's gang (Koordinator's or scheduler-plugins')."""
    return bool(pod.labels.get(names.LABEL_POD_GROUP)) or joins_upstream_pod_group(pod)


def joins_upstream_pod_group(pod: Pod) -> bool:
    """Whether a scheduler-plugins PodGroup (`scheduling.x-k8s.io`) describes the pod's gang."""
    return bool(pod.labels.get(names.LABEL_UPSTREAM_POD_GROUP)) and not _koordinator_name(pod)


def _koordinator_name(pod: Pod) -> str:
    """The gang one of Koordinator's names gives the pod (with its precedence), or ""."""
    return (
        pod.labels.get(names.LABEL_POD_GROUP)
        or pod.labels.get(names.LABEL_LIGHTWEIGHT_GANG_NAME)
        or pod.annotations.get(names.ANNOTATION_GANG_NAME)
        or ""
    )


def gang_conflict(pod: Pod) -> str:
    """Why the pod is in no gang though it names one: it names one of Koordinator's gangs and a
    scheduler-plugins PodGroup, so neither project's meaning can be taken without dropping the
    other's ("" when it names at most one kind)."""
    upstream = pod.labels.get(names.LABEL_UPSTREAM_POD_GROUP)
    if not upstream or not (koordinator := _koordinator_name(pod)):
        return ""
    given = next(
        key
        for key, value in (
            (names.LABEL_POD_GROUP, pod.labels.get(names.LABEL_POD_GROUP)),
            (names.LABEL_LIGHTWEIGHT_GANG_NAME, pod.labels.get(names.LABEL_LIGHTWEIGHT_GANG_NAME)),
            (names.ANNOTATION_GANG_NAME, pod.annotations.get(names.ANNOTATION_GANG_NAME)),
        )
        if value
    )
    return (
        f"pod {pod.key} names two kinds of gang: {given}={koordinator} (Koordinator's) and "
        f"{names.LABEL_UPSTREAM_POD_GROUP}={upstream} (scheduler-plugins' PodGroup); "
        "keep one of them"
    )


def gang_name(pod: Pod) -> str | None:
    """`namespace/name` of the pod's gang, with Koordinator's precedence, then scheduler-plugins'
    label; None for a pod on its own or one that names two kinds of gang (`gang_conflict`)."""
    koordinator = _koordinator_name(pod)
    upstream = pod.labels.get(names.LABEL_UPSTREAM_POD_GROUP)
    if koordinator and upstream:
        return None
    name = koordinator or upstream
    return f"{pod.namespace}/{name}" if name else None


def gang_from_pod(pod: Pod) -> GangSpec | None:
    """The pod's gang as far as the pod tells it, or None for a pod on its own. A PodGroup
    member's spec has `from_pod_group` set and no min (the PodGroup holds it). Raises
    AnnotationError when the gang cannot be formed (no usable min, or two kinds of gang named)."""
    if conflict := gang_conflict(pod):
        raise AnnotationError(names.LABEL_UPSTREAM_POD_GROUP, conflict, obj=pod.key)
    name = gang_name(pod)
    if name is None:
        return None
    if joins_pod_group(pod):
        return GangSpec(
            name=name,
            min_available=None,
            total_number=None,
            groups=(name,),
            from_pod_group=True,
            upstream=joins_upstream_pod_group(pod),
        )
    spec = spec_from_pod(pod, name)
    if spec.error:
        raise AnnotationError(_min_key(pod), spec.error, obj=pod.key)
    return spec


def _min_key(pod: Pod) -> str:
    if names.LABEL_LIGHTWEIGHT_GANG_MIN_AVAILABLE in pod.labels:
        return names.LABEL_LIGHTWEIGHT_GANG_MIN_AVAILABLE
    return names.ANNOTATION_GANG_MIN_AVAILABLE


def spec_from_pod(
    pod: Pod,
    name: str,
    *,
    default_wait: float = DEFAULT_WAITING_SECONDS,
    default_policy: MatchPolicy = MatchPolicy.ONCE_SATISFIED,
) -> GangSpec:
    """The lightweight gang `name` described by a member's labels and annotations."""
    ann = pod.annotations
    problems: list[str] = []
    key = _min_key(pod)
    raw_min = pod.labels.get(key) if key in pod.labels else ann.get(key)
    minimum, error = 0, ""
    if raw_min is None:
        error = f"{key} is required with the gang name"
    else:
        parsed = _integer(raw_min)
        if parsed is None:
            error = f"{key} {raw_min!r} is not an integer"
        else:
            minimum = _at_least_zero(parsed, key, problems)
    waiting = default_wait
    if raw_wait := ann.get(names.ANNOTATION_GANG_WAITING_TIME):
        try:
            waiting = parse_duration(raw_wait)
        except ValueError:
            waiting = -1.0
        if waiting < 0:
            problems.append(f"{names.ANNOTATION_GANG_WAITING_TIME} {raw_wait!r} is not a duration ≥ 0")
        if waiting <= 0:
            waiting = default_wait
    return _spec(name, minimum, ann, waiting=waiting, default_policy=default_policy, problems=problems, error=error)


def spec_from_pod_group(
    group: PodGroup,
    *,
    default_wait: float = DEFAULT_WAITING_SECONDS,
    default_policy: MatchPolicy = MatchPolicy.ONCE_SATISFIED,
    upstream_wait: float = UPSTREAM_DEFAULT_WAITING_SECONDS,
) -> GangSpec:
    """The gang a PodGroup CR describes (`spec.minMember`, `spec.scheduleTimeoutSeconds`; for a
    scheduler-plugins PodGroup also `spec.minResources`, and that project's semantics: see the
    module docstring). `upstream_wait` is the wait of a scheduler-plugins PodGroup that names
    none (its `scheduleTimeoutSeconds` 0 means the same, as there)."""
    problems: list[str] = []
    minimum = _at_least_zero(group.min_member, "spec.minMember", problems)
    wait = upstream_wait if group.upstream else default_wait
    timeout = group.schedule_timeout_seconds
    if timeout is not None and timeout > 0:
        wait = float(timeout)
    elif timeout is not None and not (group.upstream and timeout == 0):
        problems.append(f"spec.scheduleTimeoutSeconds {timeout} is not positive")
    if group.upstream:
        spec = _spec(
            group.meta.key,
            minimum,
            _EMPTY,
            waiting=wait,
            default_policy=MatchPolicy.WAITING_AND_RUNNING,
            problems=problems,
            pod_group=True,
        )
        return replace(spec, upstream=True, min_resources=dict(group.min_resources))
    return _spec(
        group.meta.key,
        minimum,
        group.meta.annotations,
        waiting=wait,
        default_policy=default_policy,
        problems=problems,
        pod_group=True,
    )


def _at_least_zero(value: int, what: str, problems: list[str]) -> int:
    if value <= 0:
        problems.append(f"{what} {value} is not positive: every member is scheduled on its own")
        return 0
    return value


def _spec(
    name: str,
    minimum: int,
    ann: Mapping[str, str],
    *,
    waiting: float,
    default_policy: MatchPolicy,
    problems: list[str],
    error: str = "",
    pod_group: bool = False,
) -> GangSpec:
    total = minimum
    if raw_total := ann.get(names.ANNOTATION_GANG_TOTAL_NUMBER):
        parsed = _integer(raw_total)
        if parsed is None or parsed < minimum:
            problems.append(f"{names.ANNOTATION_GANG_TOTAL_NUMBER} {raw_total!r} is not a number ≥ min {minimum}")
        else:
            total = parsed
    mode = GangMode.STRICT
    if raw_mode := ann.get(names.ANNOTATION_GANG_MODE):
        try:
            mode = GangMode(raw_mode)
        except ValueError:
            problems.append(f"{names.ANNOTATION_GANG_MODE} {raw_mode!r} is not Strict or NonStrict")
    policy = default_policy
    raw_policy = ann.get(names.ANNOTATION_GANG_MATCH_POLICY) or ann.get(names.ANNOTATION_ALIAS_GANG_MATCH_POLICY)
    if raw_policy:
        try:
            policy = MatchPolicy(raw_policy)
        except ValueError:
            known = ", ".join(p.value for p in MatchPolicy)
            problems.append(f"{names.ANNOTATION_GANG_MATCH_POLICY} {raw_policy!r} is not one of {known}")
    return GangSpec(
        name=name,
        min_available=minimum,
        total_number=total,
        mode=mode,
        waiting_seconds=waiting,
        groups=_groups(ann, name, problems),
        match_policy=policy,
        from_pod_group=pod_group,
        problems=tuple(problems),
        error=error,
    )


def _integer(raw: str) -> int | None:
    """A decimal integer as Go's strconv.ParseInt reads it (a sign allowed), else None."""
    digits = raw[1:] if raw[:1] in ("+", "-") else raw
    return int(raw) if digits.isascii() and digits.isdigit() else None


def _groups(ann: Mapping[str, str], own: str, problems: list[str]) -> tuple[str, ...]:
    """The gangs of `own`'s group (the `groups` annotation plus `own`), sorted; the gang alone,
    with a problem, when the annotation is not a JSON list of `namespace/name`."""
    raw = ann.get(names.ANNOTATION_GANG_GROUPS)
    if not raw:
        return (own,)
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if not isinstance(doc, list) or not all(
        isinstance(g, str) and g.count("/") == 1 and "" not in g.split("/") for g in doc
    ):
        problems.append(f'{names.ANNOTATION_GANG_GROUPS} {raw!r} is not a JSON list of "namespace/name"')
        return (own,)
    return tuple(sorted(set(doc) | {own}))
