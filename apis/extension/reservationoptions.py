"""How a pod chooses among the Reservations it may use, and what a Restricted one restricts.

Three of Koordinator's names (apis/extension/reservation.go), read as its scheduler reads them:

- `scheduling.koordinator.sh/reservation-order`, a label on a Reservation: of the Reservations a
  pod may use, the one with the lowest order is taken, and its node preferred. `0`, a value
  that is no integer, or no label: no order (the tightest fit is taken).
- `scheduling.koordinator.sh/exact-match-reservation`, an annotation on a pod,
  `{"resourceNames": ["cpu", ...]}`: the pod uses only a Reservation that reserves exactly what
  it requests of each of these resources (`ExactMatchReservation`, with its quirk kept: a listed
  resource that neither the pod nor the Reservation names ends the comparison as a match).
- `scheduling.koordinator.sh/reservation-restricted-options`, an annotation on a Reservation
  with `allocatePolicy: Restricted`, `{"resources": ["cpu", ...]}`: the reserved resources an
  owner may take only from the Reservation; none listed, or none of them reserved, means all
  that it reserves (`GetReservationRestrictedResources`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apis._annotation import load_json
from apis.errors import AnnotationError
from apis.extension import names

__all__ = ["ExactMatch", "exact_match_from_annotations", "order_of", "restricted_names"]

_INTEGER = re.compile(r"[+-]?[0-9]+")


def order_of(labels: Mapping[str, str]) -> int | None:
    """A Reservation's `reservation-order`, or None when it has none that counts (read as Go's
    `strconv.ParseInt(s, 10, 64)`: digits with an optional sign, within 64 bits)."""
    raw = labels.get(names.LABEL_RESERVATION_ORDER, "")
    if not _INTEGER.fullmatch(raw):
        return None
    order = int(raw)
    return order if order and -(2**63) <= order < 2**63 else None


@dataclass(frozen=True, slots=True)
class ExactMatch:
    """A pod's `exact-match-reservation`: the resources whose request must equal the reserved."""

    resource_names: tuple[str, ...] = ()

    def matches(self, requests: Mapping[str, int], reserved: Mapping[str, int]) -> bool:
        """Whether a Reservation reserving `reserved` may take a pod requesting `requests`."""
        for name in self.resource_names:
            if name not in reserved or name not in requests:
                return name not in reserved and name not in requests
            if reserved[name] != requests[name]:
                return False
        return True


def exact_match_from_annotations(annotations: Mapping[str, str], *, obj: str = "") -> ExactMatch | None:
    """The pod's exact-match spec; None without the annotation (or with an empty one). Raises
    AnnotationError for a malformed one."""
    key = names.ANNOTATION_EXACT_MATCH_RESERVATION
    raw = annotations.get(key)
    if not raw:
        return None
    doc = load_json(key, raw, obj, expect=dict, shape='an object {"resourceNames": [...]}')
    return ExactMatch(_names(doc.get("resourceNames"), key, "resourceNames", obj))


def restricted_names(annotations: Mapping[str, str], reserved: Sequence[str], *, obj: str = "") -> tuple[str, ...]:
    """Of the `reserved` resource names (sorted), those a Restricted Reservation with these
    annotations restricts. Raises AnnotationError for a malformed annotation."""
    key = names.ANNOTATION_RESERVATION_RESTRICTED_OPTIONS
    raw = annotations.get(key)
    listed: tuple[str, ...] = ()
    if raw:
        doc = load_json(key, raw, obj, expect=dict, shape='an object {"resources": [...]}')
        listed = _names(doc.get("resources"), key, "resources", obj)
    chosen = tuple(name for name in reserved if name in listed)
    return chosen or tuple(reserved)


def _names(raw: object, key: str, field: str, obj: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
        raise AnnotationError(key, f"{field} must be a list of resource names", obj=obj)
    return tuple(raw)
