"""Rules about workloads that both the API server and the workload controllers apply.

Kept in `apis` because two components need the same answer: the API server's Eviction
subresource decides whether a PodDisruptionBudget allows a disruption *now* (from the pods it
holds), and `tessera kube-controller-manager` writes the same numbers into the budget's status for
`kubectl get pdb`. Should they disagree, an eviction would be refused while the status says it is
allowed. Functions over the raw dicts of the API (a pod template is copied verbatim into pods, so
its dict is the natural unit); nothing here does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apis.errors import ValidationError

__all__ = [
    "Budget",
    "Scale",
    "controller_of",
    "disruption_budget",
    "is_pod_active",
    "is_pod_ready",
    "label_selector_matches",
    "scaled_value",
    "selector_string",
]

Obj = Mapping[str, Any]


def scaled_value(value: object, total: int, *, round_up: bool) -> int:
    """An IntOrString (`3`, `"25%"`) as a count out of `total`, as Kubernetes' intstr.GetScaledValueFromIntOrPercent.

    Raises ValidationError for anything else (`"25"`, `"x%"`, a negative number).
    """
    if isinstance(value, bool) or value is None:
        raise ValidationError("intOrString", f"{value!r}: must be an integer or a percentage")
    if isinstance(value, int):
        if value < 0:
            raise ValidationError("intOrString", f"{value}: must be greater than or equal to 0")
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    raise ValidationError("intOrString", f"{value!r}: must be an integer or a percentage (e.g. '25%')")


def _section(obj: Obj, name: str) -> Obj:
    value = obj.get(name)
    return value if isinstance(value, Mapping) else {}


def label_selector_matches(selector: Obj | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: None matches nothing, `{}` matches everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or ()
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def selector_string(selector: Obj | None) -> str:
    """The string form of a LabelSelector (`app=web,tier in (a,b)`), as a Scale's status.selector."""
    if not selector:
        return ""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), sorted(expr.get("values") or ())
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def controller_of(obj: Obj) -> Obj | None:
    """The ownerReference with `controller: true`, if any (at most one is allowed)."""
    for ref in _section(obj, "metadata").get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def is_pod_ready(pod: Obj) -> bool:
    """Ready condition True and not being deleted: what a budget counts as healthy."""
    if _section(pod, "metadata").get("deletionTimestamp"):
        return False
    for c in _section(pod, "status").get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def is_pod_active(pod: Obj) -> bool:
    """Neither finished (Succeeded/Failed) nor being deleted: what a ReplicaSet counts."""
    phase = _section(pod, "status").get("phase")
    return phase not in ("Succeeded", "Failed") and not _section(pod, "metadata").get("deletionTimestamp")


@dataclass(frozen=True, slots=True)
class Budget:
    """A PodDisruptionBudget's status numbers."""

    expected_pods: int
    current_healthy: int
    desired_healthy: int

    @property
    def disruptions_allowed(self) -> int:
        return max(0, self.current_healthy - self.desired_healthy)


#: An owner's scale: (who scales, its replicas). A ReplicaSet of a Deployment answers for the
#: Deployment, so the ReplicaSets of one rollout count once.
Scale = tuple[str, int]


def disruption_budget(pdb: Obj, pods: Iterable[Obj], scale_of: Callable[[Obj], Scale | None]) -> Budget:
    """What `pdb` allows over `pods` (those its selector matches), as the disruption controller computes it.

    An integer minAvailable needs no owners: the expected count is the pods there are. maxUnavailable
    and a percentage minAvailable scale with the owners' replicas: `scale_of(controllerRef)` gives
    an owner's scale (None when the owner is unknown: then its pods that exist are counted).
    Raises ValidationError for a value that is neither an integer nor a percentage.
    """
    spec = _section(pdb, "spec")
    matched = list(pods)
    healthy = sum(1 for p in matched if is_pod_ready(p))
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if max_unavailable is None and (min_available is None or isinstance(min_available, int)):
        desired = int(min_available or 0)
        return Budget(len(matched), healthy, desired)
    expected = _expected_pods(matched, scale_of)
    if max_unavailable is not None:
        desired = max(0, expected - scaled_value(max_unavailable, expected, round_up=True))
    else:
        desired = scaled_value(min_available, expected, round_up=True)
    return Budget(expected, healthy, desired)


def _expected_pods(pods: list[Obj], scale_of: Callable[[Obj], Scale | None]) -> int:
    owners: dict[str, int] = {}
    loose = 0
    for pod in pods:
        ref = controller_of(pod)
        scale = scale_of(ref) if ref is not None else None
        if scale is None:
            loose += 1
        else:
            owners[scale[0]] = scale[1]
    return sum(owners.values()) + loose
