"""The `scheduling.koordinator.sh/reservation-affinity` annotation: a pod that must be placed onto a
Reservation, and which ones may take it.

Koordinator's `ReservationAffinity` (apis/extension/reservation.go) and how its scheduler reads it
(`GetRequiredReservationAffinity`, `checkReservationMatchedOrIgnored`):

- `name`: that Reservation only; every other field is then ignored (the Reservation's taints
  and `unschedulable` too).
- `reservationSelector`: labels the Reservation must carry, and
  `requiredDuringSchedulingIgnoredDuringExecution.reservationSelectorTerms`: node-selector terms
  (any term, every requirement of it; an empty list matches nothing). Both are matched against
  the Reservation's labels laid over its node's labels, and a term's `matchFields` on
  `metadata.name` against the Reservation's name, as Koordinator matches a "node" made of them.
- `tolerations`: the Reservation's `spec.taints` (NoSchedule, NoExecute) must all be tolerated;
  a toleration of `node.kubernetes.io/unschedulable:NoSchedule` also lets the pod use a
  Reservation with `spec.unschedulable: true`.

The annotation present, even empty, means the pod is placed only onto a Reservation it matches
(as an owner, too), never onto free room. A toleration with an operator Kubernetes does not know
tolerates nothing (as Koordinator, which never refuses one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apis._annotation import load_json
from apis.errors import AnnotationError, ValidationError
from apis.extension import names
from apis.k8s.core import NodeSelectorTerm, Taint, Toleration

__all__ = ["ReservationAffinity", "from_pod_annotations"]

_KEY = names.ANNOTATION_RESERVATION_AFFINITY
#: The taint effects a Reservation's taints are checked for (Koordinator's DoNotScheduleTaintsFilter).
_DO_NOT_SCHEDULE = ("NoSchedule", "NoExecute")
_UNSCHEDULABLE = Taint(names.TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule")


@dataclass(frozen=True, slots=True)
class ReservationAffinity:
    name: str = ""
    selector: Mapping[str, str] = field(default_factory=dict)
    #: Any of these must match (None: the field is absent, no constraint; empty: nothing matches).
    terms: tuple[NodeSelectorTerm, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether a Reservation called `name` may take the pod, `labels` being its labels laid
        over its node's. With `name` set, only the name counts."""
        if self.name:
            return self.name == name
        if any(labels.get(k) != v for k, v in self.selector.items()):
            return False
        return self.terms is None or any(term.matches(labels, name) for term in self.terms)

    def untolerated(self, taints: Sequence[Taint]) -> Taint | None:
        """The first NoSchedule or NoExecute taint of a Reservation the pod does not tolerate."""
        for taint in taints:
            if taint.effect in _DO_NOT_SCHEDULE and not any(t.tolerates(taint) for t in self.tolerations):
                return taint
        return None

    @property
    def tolerates_unschedulable(self) -> bool:
        """Whether the pod may use a Reservation marked `spec.unschedulable`."""
        return any(t.tolerates(_UNSCHEDULABLE) for t in self.tolerations)


def from_pod_annotations(annotations: Mapping[str, str], *, obj: str = "") -> ReservationAffinity | None:
    """The pod's reservation affinity, or None without the annotation (an empty value is an
    empty affinity, as Koordinator reads it). Raises AnnotationError for a malformed one, naming
    the field."""
    raw = annotations.get(_KEY)
    if raw is None:
        return None
    if raw == "":
        return ReservationAffinity()
    doc = load_json(_KEY, raw, obj, expect=dict, shape="an object with name, reservationSelector or required terms")
    name = doc.get("name") or ""
    selector = doc.get("reservationSelector") or {}
    if not isinstance(name, str):
        raise AnnotationError(_KEY, "name must be a string", obj=obj)
    if not isinstance(selector, dict) or not all(isinstance(v, str) for v in selector.values()):
        raise AnnotationError(_KEY, "reservationSelector must map label keys to strings", obj=obj)
    terms = _terms(doc.get("requiredDuringSchedulingIgnoredDuringExecution"), obj)
    return ReservationAffinity(name, dict(selector), terms, _tolerations(doc.get("tolerations"), obj))


def _terms(raw: Any, obj: str) -> tuple[NodeSelectorTerm, ...] | None:
    if raw is None:
        return None
    path = "requiredDuringSchedulingIgnoredDuringExecution.reservationSelectorTerms"
    if not isinstance(raw, dict):
        raise AnnotationError(_KEY, "requiredDuringSchedulingIgnoredDuringExecution must be an object", obj=obj)
    terms = raw.get("reservationSelectorTerms") or []
    if not isinstance(terms, list):
        raise AnnotationError(_KEY, f"{path} must be a list", obj=obj)
    try:
        return tuple(NodeSelectorTerm.from_dict(term, f"{path}[{i}]", obj) for i, term in enumerate(terms))
    except ValidationError as e:
        raise AnnotationError(_KEY, f"{e.field}: {e.reason}", obj=obj) from None


def _tolerations(raw: Any, obj: str) -> tuple[Toleration, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise AnnotationError(_KEY, "tolerations must be a list", obj=obj)
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise AnnotationError(_KEY, f"tolerations[{i}] must be an object", obj=obj)
        operator = item.get("operator") or "Equal"  # Kubernetes reads "" as Equal
        if operator not in ("Equal", "Exists"):
            continue  # Kubernetes' ToleratesTaint: an unknown operator tolerates nothing
        try:
            out.append(Toleration.from_dict({**item, "operator": operator}, f"tolerations[{i}]", obj))
        except ValidationError as e:
            raise AnnotationError(_KEY, f"{e.field}: {e.reason}", obj=obj) from None
    return tuple(out)
