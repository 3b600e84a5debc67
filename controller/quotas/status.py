"""What a quota's status and annotations should say, and the patches that make them say it.

Pure: `QuotaFigures.of(manager, name, min)` reads the shared `QuotaManager` (the same accounting the
scheduler admits with), and the patch builders compare with the cached object so that nothing is
written when nothing changed. Koordinator's names and JSON shape:

| field | what |
| --- | --- |
| `status.used` | what the quota's pods use, its children's included (bound or reserved pods) |
| `quota.scheduling.koordinator.sh/runtime` | the runtime: what the quota may use now |
| `.../request` | what its pods (pending or placed) and children ask for |
| `.../allocated` | what is allocated to it and its children: `used`, summed over the subtree |
| `.../guaranteed` | per resource, the larger of min and allocated (what it keeps, as Koordinator says) |
| `.../non-preemptible-used` | what its non-preemptible pods use, its children's included |
| `status.conditions[Valid]` | whether the quota obeys the tree's rules |
| `status.conditions[ReclaimPaused]` | True while reclaim's circuit breaker holds evictions back (once it ever did) |

Each annotation is a JSON object of resource name to Kubernetes quantity string.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from apis.crds.elasticquota import ElasticQuota
from apis.extension import names
from apis.extension.quota import encode_resource_annotation
from apis.k8s import resources
from apis.k8s.meta import Condition
from kube.quotas import QuotaManager

__all__ = [
    "CONDITION_RECLAIM_PAUSED",
    "CONDITION_VALID",
    "REASON_INVALID",
    "REASON_MALFORMED",
    "REASON_RECLAIM_ALLOWED",
    "REASON_VALID",
    "STATUS_ANNOTATIONS",
    "QuotaFigures",
    "annotations_patch",
    "reclaim_condition",
    "status_patch",
    "valid_condition",
]

#: The condition Tessera's controller keeps on every quota: True, or False with the broken rule.
CONDITION_VALID: Final = "Valid"
REASON_VALID: Final = "RulesSatisfied"
#: The quota breaks one of the tree's rules (or has a bad annotation): see its message.
REASON_INVALID: Final = "InvalidQuota"
#: The quota does not parse at all (a bad quantity, min above max): nobody can use it.
REASON_MALFORMED: Final = "MalformedQuota"
#: True (a warning: with the breaker's reason and figures) while reclaim evicts nothing because
#: the figures jumped (`controller.quotas.breaker`); False once it may again. Written only once
#: the breaker has been open, so a cluster where it never tripped carries no such condition.
CONDITION_RECLAIM_PAUSED: Final = "ReclaimPaused"
REASON_RECLAIM_ALLOWED: Final = "ReclaimAllowed"

#: The annotations this controller owns, in the order they are listed.
STATUS_ANNOTATIONS: Final = (
    names.ANNOTATION_QUOTA_RUNTIME,
    names.ANNOTATION_QUOTA_REQUEST,
    names.ANNOTATION_QUOTA_ALLOCATED,
    names.ANNOTATION_QUOTA_GUARANTEED,
    names.ANNOTATION_QUOTA_NON_PREEMPTIBLE_USED,
)


@dataclass(frozen=True, slots=True)
class QuotaFigures:
    """One quota's numbers, in base units (see the module docstring for each)."""

    used: dict[str, int]
    runtime: dict[str, int]
    request: dict[str, int]
    allocated: dict[str, int]
    guaranteed: dict[str, int]
    non_preemptible_used: dict[str, int]

    @classmethod
    def of(cls, manager: QuotaManager, name: str, low: Mapping[str, int]) -> QuotaFigures:
        """`low`: the quota's min (in the names quotas count, `QuotaSpec.min`). The use of the
        quotas below it counts in its own."""
        used = manager.subtree_used(name)
        return cls(
            used=used,
            runtime=manager.runtime(name),
            request=manager.request(name),
            allocated=used,
            guaranteed=resources.max_of(low, used),
            non_preemptible_used=manager.subtree_non_preemptible_used(name),
        )

    def annotations(self) -> dict[str, str]:
        values = (self.runtime, self.request, self.allocated, self.guaranteed, self.non_preemptible_used)
        return {key: encode_resource_annotation(v) for key, v in zip(STATUS_ANNOTATIONS, values, strict=True)}


def valid_condition(problems: list[str], *, reason: str = REASON_INVALID) -> tuple[str, str, str]:
    """(status, reason, message) of the `Valid` condition for a quota with these problems."""
    if not problems:
        return "True", REASON_VALID, "the quota obeys the tree's rules"
    return "False", reason, "; ".join(problems)


def reclaim_condition(
    paused: tuple[str, str] | None, current: Iterable[Condition], *, resumed: str = REASON_RECLAIM_ALLOWED
) -> tuple[str, str, str] | None:
    """(status, reason, message) of `ReclaimPaused`: True with the breaker's (reason, message)
    while paused; False (`resumed`: why) where the quota carries the condition; else None (not
    written)."""
    if paused is not None:
        return "True", paused[0], paused[1]
    if any(c.type == CONDITION_RECLAIM_PAUSED for c in current):
        return "False", resumed, "reclaim evicts pods of quotas over their runtime past the grace period"
    return None


def _changed(current: Iterable[Condition], wanted: Mapping[str, tuple[str, str, str]]) -> bool:
    have = {c.type: (c.status, c.reason, c.message) for c in current}
    return any(have.get(kind) != value for kind, value in wanted.items())


def _conditions(
    current: Iterable[Condition], wanted: Mapping[str, tuple[str, str, str]], now: str
) -> list[dict[str, Any]]:
    """Every condition as it is, with those of `wanted` set (each one's transition time kept
    unless its status flips), new ones last in `wanted`'s order."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for c in current:
        if c.type not in wanted:
            out.append(c.to_dict())
            continue
        seen.add(c.type)
        status, reason, message = wanted[c.type]
        since = c.last_transition_time if c.status == status and c.last_transition_time else now
        out.append(Condition(c.type, status, reason, message, since).to_dict())
    for kind, (status, reason, message) in wanted.items():
        if kind not in seen:
            out.append(Condition(kind, status, reason, message, now).to_dict())
    return out


def status_patch(
    used: Mapping[str, int],
    condition: tuple[str, str, str],
    *,
    current_used: Mapping[str, int],
    current_conditions: Iterable[Condition],
    now: str,
    reclaim: tuple[str, str, str] | None = None,
) -> dict[str, Any] | None:
    """A merge patch of `status` (used, the `Valid` condition, and `ReclaimPaused` when
    `reclaim` says it); None when all are as wanted. A resource that left `used` is removed
    (null), as a merge patch of a map needs."""
    conditions = tuple(current_conditions)
    wanted = {CONDITION_VALID: condition}
    if reclaim is not None:
        wanted[CONDITION_RECLAIM_PAUSED] = reclaim
    used_changed = dict(used) != dict(current_used)
    if not used_changed and not _changed(conditions, wanted):
        return None
    status: dict[str, Any] = {"conditions": _conditions(conditions, wanted, now)}
    if used_changed:
        gone: dict[str, Any] = {r: None for r in current_used if r not in used}
        status["used"] = {**gone, **resources.format_list(used)}
    return {"status": status}


def annotations_patch(quota: ElasticQuota, figures: QuotaFigures) -> dict[str, Any] | None:
    """A merge patch of the annotations this controller owns that differ; None when none do."""
    wanted = figures.annotations()
    changed = {k: v for k, v in wanted.items() if quota.meta.annotations.get(k) != v}
    return {"metadata": {"annotations": changed}} if changed else None
