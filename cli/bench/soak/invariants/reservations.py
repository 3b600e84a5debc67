"""Reservations: only owners consume one, an allocateOnce one has at most one owner, and an expired
one holds nothing.

A pod placed onto a Reservation says so in its `reservation-allocated` annotation; the
Reservation's `owners` (`Reservation.matches_owner`) say who may be. A Reservation gone from the
API server (deleted after it ended) cannot be judged and is skipped. Holding nothing once expired
is judged three ways: an Available Reservation past its expiry is marked Failed (Expired) within
`Bounds.reservation_expiry_s`; no pod created after a Reservation's expiry is placed onto it; and,
in the devices family and the fit model, only Available Reservations hold devices, so a scheduler
that kept holding an expired one's devices leaves pods that fit pending (`fitting-pod-pending`).
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from typing import Final

from apis.crds.reservation import Reservation, allocated_from_pod
from apis.errors import AnnotationError
from apis.k8s.core import Pod
from cli.bench.soak.invariants.base import Bounds, Invariant, Violation
from cli.bench.soak.state import ClusterState, created_at

__all__ = ["consumed_after_expiry", "invariants", "non_owner", "not_expired", "owners_beyond_once"]

#: creationTimestamps (a Reservation's expiry is computed from one) have whole seconds.
_CLOCK_SLACK_S: Final = 1.0


def invariants(bounds: Bounds) -> list[Invariant]:
    return [
        Invariant("reservation-non-owner", non_owner),
        Invariant("reservation-owners-beyond-once", owners_beyond_once),
        Invariant("reservation-used-after-expiry", consumed_after_expiry),
        Invariant("reservation-not-expired", not_expired, grace_s=bounds.reservation_expiry_s),
    ]


def _consumers(state: ClusterState) -> list[tuple[Pod, Reservation]]:
    """(pod, the Reservation it consumed) for every listed pod whose annotation names one that exists."""
    by_name = {r.name: r for r in state.reservations}
    out = []
    for pod in state.pods:
        try:
            allocated = allocated_from_pod(pod)
        except AnnotationError:
            continue
        if allocated is None:
            continue
        reservation = by_name.get(allocated.name)
        if reservation is not None and (not allocated.uid or allocated.uid == reservation.uid):
            out.append((pod, reservation))
    return out


def non_owner(state: ClusterState) -> list[Violation]:
    """A pod placed onto a Reservation whose owners it does not match."""
    return [
        Violation(
            "reservation-non-owner",
            (f"reservation/{r.name}", pod.key),
            f"{pod.key} consumed reservation {r.name}, whose owners it does not match",
        )
        for pod, r in _consumers(state)
        if not r.matches_owner(pod)
    ]


def owners_beyond_once(state: ClusterState) -> list[Violation]:
    """An allocateOnce Reservation consumed by two pods (listed, or in its `currentOwners`)."""
    pods_of: dict[str, set[str]] = defaultdict(set)
    reservations = {}
    for pod, r in _consumers(state):
        pods_of[r.uid].add(pod.key)
        reservations[r.uid] = r
    for r in state.reservations:
        if len(r.current_owners) > 1:
            pods_of[r.uid].update(f"{o.namespace}/{o.name}" for o in r.current_owners)
            reservations[r.uid] = r
    return [
        Violation(
            "reservation-owners-beyond-once",
            (f"reservation/{reservations[uid].name}", *sorted(pods)),
            f"allocateOnce reservation {reservations[uid].name} has {len(pods)} owners: {', '.join(sorted(pods))}",
        )
        for uid, pods in pods_of.items()
        if reservations[uid].allocate_once and len(pods) > 1
    ]


def _expiry(reservation: Reservation) -> float | None:
    at = reservation.expiry()
    return at.timestamp() if at is not None else None


def consumed_after_expiry(state: ClusterState) -> list[Violation]:
    """A pod created after the Reservation it consumed had expired."""
    violations = []
    for pod, r in _consumers(state):
        expiry = _expiry(r)
        if expiry is not None and created_at(pod, state) > expiry + _CLOCK_SLACK_S:
            violations.append(
                Violation(
                    "reservation-used-after-expiry",
                    (f"reservation/{r.name}", pod.key),
                    f"{pod.key}, created after reservation {r.name} expired, consumed it",
                )
            )
    return violations


def not_expired(state: ClusterState) -> list[Violation]:
    """A Reservation still holding resources past its expiry (the grace is the scheduler's look)."""
    now = datetime.datetime.fromtimestamp(state.now, datetime.UTC)
    return [
        Violation(
            "reservation-not-expired",
            (f"reservation/{r.name}",),
            f"reservation {r.name} is {r.phase.value} past its expiry {r.expiry()}",
        )
        for r in state.reservations
        if r.phase.holds_resources and r.expired(now)
    ]
