"""Which of the Reservations whose owners a pod matches it may use, and which one it takes.

Koordinator's rules (`checkReservationMatchedOrIgnored`, `filterWithReservations`,
`fitsReservation`, `NominateReservation`), pure:

- `why_not`: a pod whose reservation-affinity names a Reservation may use only that one, and
  only its exact-match spec still counts. Otherwise, in Koordinator's order: a Reservation with
  `spec.unschedulable` is not for it (unless its affinity tolerates
  `node.kubernetes.io/unschedulable`), nor one with a NoSchedule/NoExecute taint its affinity
  does not tolerate (a pod without the annotation is not held to taints, as in Koordinator),
  nor one its affinity does not select (the Reservation's labels over its node's), nor one its
  exact-match spec rules out.
- `shortfall`: a pod without an affinity ignores a Reservation that reserves none of what it
  asks for; a Restricted Reservation takes a pod only when what it has left holds the pod's
  request of each restricted resource.
- `nominate`: of those it may use on a node, the pod takes the lowest `reservation-order`,
  then the tightest fit (`fit_score`: Koordinator's ScoreReservation, most-allocated over the
  reserved resources), then the first by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apis.extension.reservationaffinity import ReservationAffinity
from apis.extension.reservationoptions import ExactMatch
from apis.k8s.resources import format_quantity
from scheduler.cache.reservations import HeldReservation

__all__ = ["MAX_FIT_SCORE", "fit_score", "nominate", "shortfall", "why_not"]

MAX_FIT_SCORE = 100
#: Koordinator's diagnosis lines for a pod with an affinity that no Reservation takes.
NAME_UNMATCHED = "didn't match the requested reservation name"
UNSCHEDULABLE = "is unschedulable"
AFFINITY_UNMATCHED = "didn't match affinity rules"
NOT_EXACT = "is not exact matched"


def why_not(
    held: HeldReservation,
    *,
    affinity: ReservationAffinity | None,
    exact: ExactMatch | None,
    requests: Mapping[str, int],
    node_labels: Mapping[str, str],
) -> str | None:
    """Why an owner may not use `held` (Koordinator's diagnosis, without the count); None: it may."""
    reservation = held.reservation
    reserved = reservation.reserved()
    if affinity is not None and affinity.name:
        if affinity.name != reservation.name:
            return NAME_UNMATCHED
        return None if exact is None or exact.matches(requests, reserved) else NOT_EXACT
    if reservation.unschedulable and (affinity is None or not affinity.tolerates_unschedulable):
        return UNSCHEDULABLE
    if affinity is not None:
        taint = affinity.untolerated(reservation.taints)
        if taint is not None:
            return f"had untolerated taint {{{taint.key}: {taint.value}}}"
        if not affinity.matches(reservation.name, {**node_labels, **reservation.meta.labels}):
            return AFFINITY_UNMATCHED
    if exact is not None and not exact.matches(requests, reserved):
        return NOT_EXACT
    return None


def shortfall(held: HeldReservation, requests: Mapping[str, int], *, required: bool) -> str | None:
    """Why `held` cannot take a pod asking `requests` (Koordinator's reservation-level reason);
    None when it can. `required`: the pod has a reservation-affinity (it may not skip one that
    reserves none of what it asks for)."""
    counted = held.reservation.counted_names()
    if not required and not any(requests.get(name) for name in counted):
        return "reserves none of what the pod requests"
    for name in held.reservation.restricted_names():
        asked = requests.get(name, 0)
        if asked and asked > held.remaining.get(name, 0):
            left = format_quantity(name, held.remaining.get(name, 0))
            return f"Insufficient {name}, requested: {format_quantity(name, asked)}, left: {left}"
    return None


def fit_score(held: HeldReservation, requests: Mapping[str, int]) -> int:
    """Koordinator's ScoreReservation: over what it reserves, how full the pod would leave it
    (most allocated, 0..100; a resource the pod would overflow scores 0)."""
    reserved = held.reservation.reserved()
    if not reserved:
        return 0
    total = 0
    for name, capacity in reserved.items():
        used = requests.get(name, 0) + held.allocated.get(name, 0)
        if used <= capacity:
            total += MAX_FIT_SCORE * used // capacity
    return total // len(reserved)


def nominate(usable: Sequence[HeldReservation], requests: Mapping[str, int]) -> HeldReservation:
    """The Reservation the pod takes among `usable` (on one node; not empty)."""

    def key(held: HeldReservation) -> tuple[int, int, int, str]:
        order = held.reservation.order
        return (order is None, order or 0, -fit_score(held, requests), held.name)

    return min(usable, key=key)
