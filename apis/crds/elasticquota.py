"""The `ElasticQuota` CR (scheduling.sigs.k8s.io/v1alpha1): a namespaced min/max resource budget.

Quotas form a tree through labels (`quota.scheduling.koordinator.sh/parent`, `is-parent`). The
scheduler's ElasticQuota plugin (opt-in) admits pods against each quota's runtime; in Koordinator
the controller writes `status.used` and the runtime annotations back (Tessera's does too, with a
`Valid` condition: `controller/quotas`). Readers for those labels and annotations live in
`apis.extension.quota`.

For quota charging, when it is built: a pod's requests (`Pod.requests()`) already carry only the
current device names, Koordinator's deprecated `kubernetes.io/gpu-core`, ... read as
`koordinator.sh/...` (`apis.extension.deprecated`). `min`/`max` here are kept as written:
Koordinator renames only its deprecated batch names in quotas (`koordinator.sh/batch-cpu` →
`kubernetes.io/batch-cpu`), not device names, so a quota written in the old device names would
not match what pods are charged. Decide then whether to follow Koordinator or to read them with
`deprecated.to_current` as well (and do the batch renaming either way).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apis import _fields as f
from apis.errors import ValidationError
from apis.extension import names
from apis.k8s import resources
from apis.k8s.meta import Condition, ObjectMeta

__all__ = ["ElasticQuota"]


@dataclass(frozen=True, slots=True)
class ElasticQuota:
    meta: ObjectMeta
    min: resources.ResourceList = field(default_factory=dict)
    max: resources.ResourceList = field(default_factory=dict)
    used: resources.ResourceList = field(default_factory=dict)
    #: status.conditions: Tessera's controller says there whether the quota obeys the tree's rules.
    conditions: tuple[Condition, ...] = ()

    @classmethod
    def from_dict(cls, raw: object) -> ElasticQuota:
        d = f.mapping(raw, "elasticquota")
        meta = ObjectMeta.from_dict(d.get("metadata"))
        obj = f"elasticquota {meta.key}"
        spec = f.mapping(d.get("spec"), "spec", obj)
        status = f.mapping(d.get("status"), "status", obj)
        quota = cls(
            meta=meta,
            min=resources.parse_list(spec.get("min"), field="spec.min", obj=obj),
            max=resources.parse_list(spec.get("max"), field="spec.max", obj=obj),
            used=resources.parse_list(status.get("used"), field="status.used", obj=obj),
            conditions=_conditions(status, obj),
        )
        for name, amount in quota.min.items():
            if amount < 0:
                raise ValidationError(f"spec.min[{name}]", f"must not be negative, got {amount}", obj=obj)
            if name in quota.max and amount > quota.max[name]:
                raise ValidationError(f"spec.min[{name}]", f"min {amount} exceeds max {quota.max[name]}", obj=obj)
        return quota

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "apiVersion": names.ELASTIC_QUOTAS.api_version,
            "kind": names.ELASTIC_QUOTAS.kind,
            "metadata": self.meta.to_dict(),
            "spec": f.drop_empty({"min": resources.format_list(self.min), "max": resources.format_list(self.max)}),
        }
        status = f.drop_empty(
            {"used": resources.format_list(self.used), "conditions": [c.to_dict() for c in self.conditions]}
        )
        if status:
            out["status"] = status
        return out


def _conditions(status: f.JSON, obj: str) -> tuple[Condition, ...]:
    """Tessera's own conditions; ones that do not read are none (the schema leaves the field
    unconstrained, as Koordinator's does not know it, and the controller writes it anew)."""
    try:
        return tuple(
            Condition.from_dict(c, f"status.conditions[{i}]", obj)
            for i, c in enumerate(f.items(status, "conditions", "status", obj))
        )
    except ValidationError:
        return ()
