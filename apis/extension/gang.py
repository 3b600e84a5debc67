"""Gang membership of a pod: Koordinator's lightweight annotations or a PodGroup CR label.

A gang is named `namespace/name`. With annotations the pod itself carries min-available,
total-number, mode, waiting time and the groups that must be satisfied together; with the
`pod-group.scheduling.sigs.k8s.io` label those come from the PodGroup CR and are left unset here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from apis._annotation import load_json
from apis.errors import AnnotationError
from apis.extension import names
from apis.k8s.core import Pod
from apis.k8s.duration import parse_duration

__all__ = ["DEFAULT_WAITING_SECONDS", "GangMode", "GangSpec", "gang_from_pod", "parse_duration", "parse_groups"]

DEFAULT_WAITING_SECONDS = 600.0


class GangMode(enum.Enum):
    STRICT = "Strict"  # one member failing rejects every waiting member of the group
    NON_STRICT = "NonStrict"  # members that fit keep their place


@dataclass(frozen=True, slots=True)
class GangSpec:
    name: str  # `namespace/name`
    min_available: int | None  # None: take it from the PodGroup CR
    total_number: int | None
    mode: GangMode = GangMode.STRICT
    waiting_seconds: float = DEFAULT_WAITING_SECONDS
    groups: tuple[str, ...] = ()  # gangs that must be satisfied together, including this one
    from_pod_group: bool = False


def _positive_int(annotations: Mapping[str, str], key: str, obj: str) -> int | None:
    raw = annotations.get(key)
    if raw is None or raw == "":
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise AnnotationError(key, f"expected a positive integer, got {raw!r}", obj=obj)
    return int(raw)


def gang_from_pod(pod: Pod) -> GangSpec | None:
    """The pod's gang, or None. Raises AnnotationError for malformed gang annotations."""
    ann, obj = pod.annotations, pod.key
    pod_group = pod.labels.get(names.LABEL_POD_GROUP)
    gang_name = ann.get(names.ANNOTATION_GANG_NAME)
    if not gang_name and not pod_group:
        return None
    name = f"{pod.namespace}/{gang_name or pod_group}"
    min_available = _positive_int(ann, names.ANNOTATION_GANG_MIN_AVAILABLE, obj)
    if gang_name and min_available is None:
        raise AnnotationError(names.ANNOTATION_GANG_MIN_AVAILABLE, "is required with the gang name", obj=obj)
    total = _positive_int(ann, names.ANNOTATION_GANG_TOTAL_NUMBER, obj)
    if total is not None and min_available is not None and total < min_available:
        total = min_available
    mode_text = ann.get(names.ANNOTATION_GANG_MODE) or GangMode.STRICT.value
    try:
        mode = GangMode(mode_text)
    except ValueError:
        raise AnnotationError(
            names.ANNOTATION_GANG_MODE, f"must be Strict or NonStrict, got {mode_text!r}", obj=obj
        ) from None
    waiting = DEFAULT_WAITING_SECONDS
    if raw_wait := ann.get(names.ANNOTATION_GANG_WAITING_TIME):
        try:
            waiting = parse_duration(raw_wait)
        except ValueError as e:
            raise AnnotationError(names.ANNOTATION_GANG_WAITING_TIME, str(e), obj=obj) from None
        if waiting <= 0:
            raise AnnotationError(names.ANNOTATION_GANG_WAITING_TIME, "must be positive", obj=obj)
    return GangSpec(
        name=name,
        min_available=min_available,
        total_number=total,
        mode=mode,
        waiting_seconds=waiting,
        groups=parse_groups(ann, name, obj),
        from_pod_group=not gang_name,
    )


def parse_groups(ann: Mapping[str, str], own: str, obj: str) -> tuple[str, ...]:
    """The gangs of `own`'s group (the `groups` annotation plus `own`), sorted. Raises
    AnnotationError when the annotation is not a JSON list of `namespace/name`."""
    raw = ann.get(names.ANNOTATION_GANG_GROUPS)
    if not raw:
        return (own,)
    key, shape = names.ANNOTATION_GANG_GROUPS, 'a JSON list of "namespace/name" strings'
    doc = load_json(key, raw, obj, expect=list, shape=shape)
    if not all(isinstance(g, str) and g.count("/") == 1 and "" not in g.split("/") for g in doc):
        raise AnnotationError(key, f"expected {shape}", obj=obj)
    return tuple(sorted(set(doc) | {own}))
