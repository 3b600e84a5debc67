"""policy/v1 PodDisruptionBudget, as the scheduler reads it: whom it covers and what it allows.

The scheduler's preemption avoids victims whose eviction would break a budget (kube's
DefaultPreemption does), so it needs only the selector and the status the disruption
controller maintains (`status.disruptionsAllowed`, and `status.disruptedPods`: pods already
being disrupted, which the budget has counted). How many disruptions a budget allows is decided
by `kubecontrollers.disruption` (from `apis.k8s.workloads`); here it is read, never computed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis import _fields as f
from apis.k8s.labels import LabelSelector
from apis.k8s.meta import ObjectMeta

__all__ = ["PodDisruptionBudget"]


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    meta: ObjectMeta
    #: spec.selector; None (absent) selects nothing.
    selector: LabelSelector | None = None
    #: status.disruptionsAllowed: how many more covered pods may go now.
    disruptions_allowed: int = 0
    #: status.disruptedPods: names of covered pods already being disrupted (already counted).
    disrupted_pods: frozenset[str] = field(default_factory=frozenset)

    @property
    def key(self) -> str:
        return self.meta.key

    def covers(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether the budget counts a pod of `namespace` with `labels`. An absent or empty
        selector covers nothing here, as kube's preemption reads it."""
        if self.selector is None or namespace != self.meta.namespace:
            return False
        selector = self.selector.selector
        return not selector.is_empty() and selector.matches(labels)

    @classmethod
    def from_dict(cls, raw: object) -> PodDisruptionBudget:
        """Raises ValidationError naming the field that does not parse."""
        d = f.mapping(raw, "poddisruptionbudget")
        meta = ObjectMeta.from_dict(d.get("metadata"))
        obj = f"poddisruptionbudget {meta.key}"
        spec = f.mapping(d.get("spec"), "spec", obj)
        status = f.mapping(d.get("status"), "status", obj)
        raw_selector = spec.get("selector")
        selector = None if raw_selector is None else LabelSelector.from_dict(raw_selector, "spec.selector", obj)
        disrupted = f.mapping(status.get("disruptedPods"), "status.disruptedPods", obj)
        return cls(
            meta=meta,
            selector=selector,
            disruptions_allowed=f.integer(status, "disruptionsAllowed", "status", obj, 0) or 0,
            disrupted_pods=frozenset(str(name) for name in disrupted),
        )
