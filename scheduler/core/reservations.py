"""A Reservation's status as the scheduler writes it, one pure transition per event.

The live scheduler writes these through the status subresource and `tessera what-if` keeps them
in memory; both take them from here, so what a snapshot shows is what the live scheduler
writes. Koordinator's phases and condition reasons (`apis.crds.reservation`):

    Pending ──placed──► Available ──owner bound, allocateOnce──► Succeeded
       │  ▲                 │  └────owners come and go, not allocateOnce: stays Available
       └──┘ unschedulable   │       (currentOwners and allocated follow them)
                            └──expiry passed (unused, or not allocateOnce)──► Failed
                                    (Ready False, reason Expired)

Conditions keep their `lastTransitionTime` while their status does not change. No I/O; the time
is the caller's (RFC 3339 text).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from apis.crds import reservation as rsv
from apis.crds.reservation import ObjectRef, Reservation, ReservationPhase
from apis.k8s.core import Pod
from apis.k8s.meta import Condition

__all__ = ["REASON_INVALID", "consumed", "expired", "invalid_status", "placed", "status_of", "unschedulable"]

#: The Scheduled condition's reason on a Reservation the scheduler cannot read (Tessera's own).
REASON_INVALID = "Invalid"


def placed(reservation: Reservation, *, node: str, now: str) -> Reservation:
    """Scheduled onto `node`: Available, holding what its reserve pod asks for."""
    requests = {k: v for k, v in reservation.reserve_pod().requests().items() if v}
    conditions = _set(
        reservation.conditions,
        (
            Condition(rsv.CONDITION_SCHEDULED, "True", rsv.REASON_SCHEDULED, f"placed on node {node}", now),
            Condition(rsv.CONDITION_READY, "True", rsv.REASON_AVAILABLE, "resources reserved", now),
        ),
    )
    return dataclasses.replace(
        reservation, phase=ReservationPhase.AVAILABLE, node_name=node, conditions=conditions, allocatable=requests
    )


def unschedulable(
    reservation: Reservation, *, message: str, now: str, reason: str = rsv.REASON_UNSCHEDULABLE
) -> Reservation:
    """Not placed this time: Pending, with why (as a pod's PodScheduled condition says it)."""
    condition = Condition(rsv.CONDITION_SCHEDULED, "False", reason, message, now)
    return dataclasses.replace(
        reservation, phase=ReservationPhase.PENDING, conditions=_set(reservation.conditions, (condition,))
    )


def consumed(reservation: Reservation, owners: Sequence[Pod], *, now: str) -> Reservation:
    """Owner pods are bound onto it: `currentOwners` (namespace, name and UID, by UID) and
    `allocated` (their requests of the resources it holds) say who and what, as Koordinator's
    controller writes them; an allocateOnce Reservation is then Succeeded (Ready False, reason
    Succeeded) and holds nothing. One that is not stays Available, its owners as they are now
    (none, when they are all gone); so does an allocateOnce one whose only owners are the pods
    it was placed over (pre-allocation): they use it without consuming it."""
    held = reservation.allocatable or reservation.reserved()
    allocated: dict[str, int] = {}
    for pod in owners:
        for name, amount in pod.requests().items():
            if amount and name in held:
                allocated[name] = allocated.get(name, 0) + amount
    out = dataclasses.replace(
        reservation,
        current_owners=tuple(ObjectRef.to_pod(p) for p in sorted(owners, key=lambda p: (p.uid, p.key))),
        allocated=allocated,
    )
    if not reservation.allocate_once or all(reservation.is_pre_allocated(p) for p in owners):
        return out
    keys = ", ".join(sorted(p.key for p in owners))
    ready = Condition(rsv.CONDITION_READY, "False", rsv.REASON_SUCCEEDED, f"allocated to {keys}", now)
    return dataclasses.replace(out, phase=ReservationPhase.SUCCEEDED, conditions=_set(out.conditions, (ready,)))


def expired(reservation: Reservation, *, now: str) -> Reservation:
    """Past its expiry (unused, or shared by owners that keep running): Failed, with Ready False
    and reason Expired (Koordinator's); what it had left is free."""
    at = reservation.expiry()
    when = at.strftime("%Y-%m-%dT%H:%M:%SZ") if at is not None else now
    used = "" if reservation.current_owners else " unused"
    ready = Condition(rsv.CONDITION_READY, "False", rsv.REASON_EXPIRED, f"expired at {when}{used}", now)
    return dataclasses.replace(
        reservation, phase=ReservationPhase.FAILED, conditions=_set(reservation.conditions, (ready,))
    )


def invalid_status(message: str, *, now: str) -> dict[str, object]:
    """The status of a Reservation the scheduler cannot read (the object did not parse): Pending,
    Scheduled False with reason Invalid and why. Raw JSON: there is no `Reservation` to build."""
    condition = Condition(rsv.CONDITION_SCHEDULED, "False", REASON_INVALID, message, now)
    return {"phase": ReservationPhase.PENDING.value, "conditions": [condition.to_dict()]}


def status_of(reservation: Reservation) -> dict[str, object]:
    """The `status` JSON of a Reservation (for a merge patch of the status subresource): owners
    and what they take are null when there are none, so that the patch removes the last ones."""
    status: dict[str, object] = reservation.to_dict()["status"]
    status.setdefault("currentOwners", None)
    status.setdefault("allocated", None)
    return status


def _set(conditions: Iterable[Condition], new: Iterable[Condition]) -> tuple[Condition, ...]:
    """`conditions` with each of `new` replacing the one of its type (keeping its transition time
    when the status is unchanged)."""
    out = {c.type: c for c in conditions}
    for condition in new:
        old = out.get(condition.type)
        kept = old is not None and old.status == condition.status and old.last_transition_time
        out[condition.type] = (
            dataclasses.replace(condition, last_transition_time=old.last_transition_time)
            if kept and old is not None
            else condition
        )
    return tuple(out.values())
