"""A gang's settings from its members' annotations or its PodGroup, read the way Koordinator
reads them: a value that cannot be used falls back to the default with a warning (kept in
`GangSpec.problems` for an event), and only a gang whose size cannot be known is invalid.

- `min-available`: required with `gang.scheduling.koordinator.sh/name`; a PodGroup's
  `spec.minMember`. Malformed: the gang is invalid (`GangSpec.error`), its pods unschedulable.
- `total-number`: at least min; missing, malformed or smaller → min.
- `mode`: `Strict` (default) or `NonStrict`; anything else → Strict.
- `waiting-time`: a Go duration; missing, malformed or not positive → the default (600 s); a
  PodGroup's `spec.scheduleTimeoutSeconds`.
- `groups`: a JSON list of `namespace/name`; malformed → the gang alone.
- `match-policy` (or `pod-group.scheduling.sigs.k8s.io/match-policy`): `only-waiting`,
  `waiting-and-running` or `once-satisfied` (default); anything else → the default.

On a PodGroup, mode, groups, match policy and total number are read from the PodGroup's
annotations with the same names.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from apis.crds.podgroup import PodGroup
from apis.errors import AnnotationError
from apis.extension import names
from apis.extension.gang import DEFAULT_WAITING_SECONDS, GangMode, parse_duration, parse_groups
from apis.k8s.core import Pod

__all__ = ["GangSpec", "MatchPolicy", "gang_name", "spec_from_pod", "spec_from_pod_group"]


class MatchPolicy(enum.Enum):
    """Which members count towards min at Permit."""

    ONLY_WAITING = "only-waiting"
    WAITING_AND_RUNNING = "waiting-and-running"
    #: Waiting ones until the gang was once satisfied; after that every member passes.
    ONCE_SATISFIED = "once-satisfied"


@dataclass(frozen=True, slots=True)
class GangSpec:
    name: str  # `namespace/name`
    min_available: int
    total_number: int
    mode: GangMode = GangMode.STRICT
    waiting_seconds: float = DEFAULT_WAITING_SECONDS
    #: Every gang that must be satisfied together, this one included, sorted.
    groups: tuple[str, ...] = ()
    match_policy: MatchPolicy = MatchPolicy.ONCE_SATISFIED
    from_pod_group: bool = False
    #: Values that were ignored for their default, one sentence each (warning events).
    problems: tuple[str, ...] = ()
    #: Why the gang cannot be formed at all ("" when it can).
    error: str = ""

    @property
    def group_id(self) -> str:
        """Koordinator's gang group id: the group's gang names, sorted, joined by commas."""
        return ",".join(self.groups)


def gang_name(pod: Pod) -> str | None:
    """`namespace/name` of the pod's gang (PodGroup label first, as Koordinator), or None."""
    name = pod.labels.get(names.LABEL_POD_GROUP) or pod.annotations.get(names.ANNOTATION_GANG_NAME)
    return f"{pod.namespace}/{name}" if name else None


def spec_from_pod(pod: Pod, name: str, *, default_wait: float, default_policy: MatchPolicy) -> GangSpec:
    """The lightweight gang described by a member's annotations."""
    ann, problems = pod.annotations, []
    raw_min = ann.get(names.ANNOTATION_GANG_MIN_AVAILABLE, "")
    minimum = _positive(raw_min)
    error = ""
    if minimum is None:
        error = f"{names.ANNOTATION_GANG_MIN_AVAILABLE} {raw_min!r} is not a positive integer"
    waiting = default_wait
    if raw_wait := ann.get(names.ANNOTATION_GANG_WAITING_TIME):
        try:
            waiting = parse_duration(raw_wait)
        except ValueError:
            waiting = 0.0
        if waiting <= 0:
            problems.append(f"{names.ANNOTATION_GANG_WAITING_TIME} {raw_wait!r} is not a positive duration")
            waiting = default_wait
    return _spec(
        name, minimum or 1, ann, waiting=waiting, default_policy=default_policy, problems=problems, error=error
    )


def spec_from_pod_group(group: PodGroup, *, default_wait: float, default_policy: MatchPolicy) -> GangSpec:
    """The gang a PodGroup CR describes (`spec.minMember`, `spec.scheduleTimeoutSeconds`)."""
    wait = float(group.schedule_timeout_seconds) if group.schedule_timeout_seconds else default_wait
    return _spec(
        group.meta.key,
        group.min_member,
        group.meta.annotations,
        waiting=wait,
        default_policy=default_policy,
        problems=[],
        pod_group=True,
    )


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
        parsed = _positive(raw_total)
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


def _positive(raw: str) -> int | None:
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def _groups(ann: Mapping[str, str], own: str, problems: list[str]) -> tuple[str, ...]:
    try:
        return parse_groups(ann, own, own)
    except AnnotationError:
        raw = ann.get(names.ANNOTATION_GANG_GROUPS)
        problems.append(f'{names.ANNOTATION_GANG_GROUPS} {raw!r} is not a JSON list of "namespace/name"')
        return (own,)
