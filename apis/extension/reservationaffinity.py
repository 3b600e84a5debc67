"""The `scheduling.koordinator.sh/reservation-affinity` annotation: a pod that must be placed onto a
Reservation, and which ones may take it.

Koordinator's `ReservationAffinity` (apis/extension/reservation.go), the fields Tessera reads:
`name` (that Reservation only), `reservationSelector` (labels the Reservation must carry) and
`requiredDuringSchedulingIgnoredDuringExecution.reservationSelectorTerms` (node-selector terms
over the Reservation's labels: any term, every expression of it). All that are given must hold.
A pod with the annotation is placed only onto a Reservation it matches (as an owner, too), never
onto free room.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis._annotation import load_json
from apis.errors import AnnotationError, ValidationError
from apis.extension import names
from apis.k8s.labels import Requirement, Selector

__all__ = ["ReservationAffinity", "from_pod_annotations"]

_KEY = names.ANNOTATION_RESERVATION_AFFINITY


@dataclass(frozen=True, slots=True)
class ReservationAffinity:
    name: str = ""
    selector: Mapping[str, str] = field(default_factory=dict)
    #: Any of these must match the Reservation's labels (none given: no constraint).
    terms: tuple[Selector, ...] = ()

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether a Reservation called `name` with `labels` may take the pod."""
        if self.name and self.name != name:
            return False
        if any(labels.get(k) != v for k, v in self.selector.items()):
            return False
        return not self.terms or any(term.matches(labels) for term in self.terms)


def from_pod_annotations(annotations: Mapping[str, str], *, obj: str = "") -> ReservationAffinity | None:
    """The pod's reservation affinity, or None without the annotation. Raises AnnotationError for
    a malformed one (naming the field)."""
    raw = annotations.get(_KEY)
    if raw is None:
        return None
    doc = load_json(_KEY, raw, obj, expect=dict, shape="an object with name, reservationSelector or required terms")
    name = doc.get("name") or ""
    selector = doc.get("reservationSelector") or {}
    if not isinstance(name, str):
        raise AnnotationError(_KEY, "name must be a string", obj=obj)
    if not isinstance(selector, dict) or not all(isinstance(v, str) for v in selector.values()):
        raise AnnotationError(_KEY, "reservationSelector must map label keys to strings", obj=obj)
    terms = _terms(doc.get("requiredDuringSchedulingIgnoredDuringExecution"), obj)
    return ReservationAffinity(name, dict(selector), terms)


def _terms(raw: Any, obj: str) -> tuple[Selector, ...]:
    if raw is None:
        return ()
    path = "requiredDuringSchedulingIgnoredDuringExecution.reservationSelectorTerms"
    terms = raw.get("reservationSelectorTerms") if isinstance(raw, dict) else None
    if not isinstance(terms, list):
        raise AnnotationError(_KEY, f"{path} must be a list", obj=obj)
    out = []
    for i, term in enumerate(terms):
        expressions = term.get("matchExpressions", []) if isinstance(term, dict) else None
        if not isinstance(expressions, list):
            raise AnnotationError(_KEY, f"{path}[{i}].matchExpressions must be a list", obj=obj)
        try:
            requirements = tuple(
                Requirement.from_dict(e, f"{path}[{i}].matchExpressions[{j}]", obj, allow_gt_lt=True)
                for j, e in enumerate(expressions)
            )
        except ValidationError as e:
            raise AnnotationError(_KEY, f"{e.field}: {e.reason}", obj=obj) from None
        out.append(Selector(requirements))
    return tuple(out)
