"""The Reservations table as plain values: what each Reservation holds, for whom, until when, and
why it is not (or no longer) holding anything.

Pure functions over parsed `Reservation`s (and `Invalid` ones, listed with their parse error).
Times are absolute (seconds since the epoch): the page ages them against the server's clock, so
a row changes only when its Reservation does, and a patch leaves unchanged tables out. The GPU
map draws what Available Reservations hold through `gpumap`, which names their owners with
`owners_text` from here. Phases, conditions and reasons are the ones the
scheduler writes (Koordinator's; docs/user/reservations.md):

- Pending: the `Scheduled` condition says why it is not placed (`Unschedulable`, `Invalid`);
- Available / Waiting: placed, holding `status.allocatable` (devices: its `device-allocated`
  annotation) for its owners;
- Succeeded: an owner consumed it (`currentOwners`);
- Failed: the `Ready` condition says why (`Expired`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from apis.crds.device import DeviceType
from apis.crds.reservation import (
    CONDITION_READY,
    CONDITION_SCHEDULED,
    ObjectRef,
    Reservation,
    ReservationOwner,
    ReservationPhase,
)
from apis.errors import AnnotationError, TesseraError
from apis.extension import allocation, names
from apis.k8s.meta import Condition
from dashboard import workload
from dashboard.invalid import Invalid

__all__ = ["INVALID", "ReservationRow", "device_text", "owners_text", "rows"]

#: The phase shown for a Reservation that does not parse.
INVALID: Final = "Invalid"
#: Table order: what still holds (or waits to hold) resources first, then what ended.
_ORDER: Final = {
    ReservationPhase.PENDING.value: 0,
    ReservationPhase.WAITING.value: 1,
    ReservationPhase.AVAILABLE.value: 1,
    INVALID: 2,
    ReservationPhase.FAILED.value: 3,
    ReservationPhase.SUCCEEDED.value: 3,
}
#: The condition that says why a Reservation is in its phase (Pending: why not placed; ended: how).
_EXPLAINED_BY: Final = {
    ReservationPhase.PENDING: CONDITION_SCHEDULED,
    ReservationPhase.FAILED: CONDITION_READY,
    ReservationPhase.SUCCEEDED: CONDITION_READY,
}


@dataclass(frozen=True, slots=True)
class ReservationRow:
    name: str
    phase: str  # a ReservationPhase's value, or INVALID
    node: str
    #: What it holds once placed (`status.allocatable`), else what its template asks for.
    holds: str
    #: Which devices its `device-allocated` annotation names (`GPU 0 100% · GPU 1 50%`), or ''.
    devices: str
    owners: tuple[str, ...]
    current_owners: tuple[str, ...]  # namespace/name
    #: metadata.creationTimestamp in seconds since the epoch; None when unreadable.
    created: float | None
    #: When an unused Reservation expires, in seconds since the epoch; None: never, or ended.
    expires: float | None
    #: The same as RFC 3339, '' for none.
    expires_at: str
    #: Why it is in its phase: `reason: message` of the condition that says so, or the parse error.
    reason: str
    conditions: tuple[Condition, ...] = ()


def owners_text(owner: ReservationOwner) -> str:
    """One owner for people: `pod ml/x`, `StatefulSet ml/trainer`, `labels app=infer`, ANDed
    parts joined by ` & `."""
    parts = []
    if owner.object_ref is not None:
        parts.append(f"pod {_ref_text(owner.object_ref)}")
    if owner.controller is not None:
        c = owner.controller
        name = f"{c.namespace}/{c.name}" if c.namespace else (c.name or c.uid or "*")
        parts.append(f"{c.kind or 'controller'} {name}")
    if owner.label_selector is not None:
        labels = [f"{k}={v}" for k, v in sorted(owner.label_selector.match_labels.items())]
        labels += [f"{e.key} {e.operator.value} ({','.join(e.values)})" for e in owner.label_selector.match_expressions]
        parts.append(f"labels {','.join(labels) or '(any)'}")
    return " & ".join(parts)


def _ref_text(ref: ObjectRef) -> str:
    name = ref.name or ref.uid or "*"
    return f"{ref.namespace}/{name}" if ref.namespace else name


def device_text(reservation: Reservation) -> str:
    """The devices its `device-allocated` annotation names, for people; '' when none; the
    annotation's error when it cannot be read."""
    text = reservation.meta.annotations.get(names.ANNOTATION_DEVICE_ALLOCATED)
    if not text:
        return ""
    try:
        decoded = allocation.decode(text, obj=f"reservation {reservation.name}")
    except AnnotationError as e:
        return f"unreadable: {e}"
    out = []
    for dtype in sorted(decoded, key=lambda t: t.value):
        for a in decoded[dtype]:
            if dtype is DeviceType.GPU:
                out.append(f"GPU {a.minor} {a.resources.get(names.GPU_CORE, 0)}%")
            elif a.vfs:
                out.append(f"{dtype.value} {a.minor} ({len(a.vfs)} VF)")
            else:
                out.append(f"{dtype.value} {a.minor}")
    return " · ".join(out)


def _holds(reservation: Reservation) -> str:
    if reservation.allocatable:
        return workload.request_summary(reservation.allocatable)
    try:
        return workload.request_summary(reservation.reserve_pod().requests())
    except TesseraError as e:  # parsed once already, so only a changed template could get here
        return f"unreadable template: {e}"


def _reason(reservation: Reservation) -> str:
    if reservation.phase.holds_resources and reservation.unschedulable:
        return "spec.unschedulable: no new owner may use it"
    wanted = _EXPLAINED_BY.get(reservation.phase)
    condition = next((c for c in reservation.conditions if c.type == wanted), None)
    if condition is None or (condition.status == "True" and reservation.phase is ReservationPhase.PENDING):
        return ""
    return ": ".join(p for p in (condition.reason, condition.message) if p)


def _expiry(reservation: Reservation) -> tuple[float | None, str]:
    if reservation.phase.terminal:
        return None, ""
    try:
        at = reservation.expiry()
    except TesseraError:  # an unreadable creationTimestamp: the API server would not write one
        return None, ""
    if at is None:
        return None, ""
    return at.timestamp(), at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _row(reservation: Reservation) -> ReservationRow:
    expires, expires_at = _expiry(reservation)
    return ReservationRow(
        name=reservation.name,
        phase=reservation.phase.value,
        node=reservation.node_name,
        holds=_holds(reservation),
        devices=device_text(reservation),
        owners=tuple(owners_text(o) for o in reservation.owners),
        current_owners=tuple(_ref_text(o) for o in reservation.current_owners),
        created=workload.epoch_seconds(reservation.meta.creation_timestamp),
        expires=expires,
        expires_at=expires_at,
        reason=_reason(reservation),
        conditions=reservation.conditions,
    )


def _invalid_row(bad: Invalid) -> ReservationRow:
    return ReservationRow(
        name=bad.name,
        phase=INVALID,
        node="",
        holds="",
        devices="",
        owners=(),
        current_owners=(),
        created=workload.epoch_seconds(bad.created),
        expires=None,
        expires_at="",
        reason=bad.error,
    )


def rows(reservations: Iterable[Reservation | Invalid]) -> Sequence[ReservationRow]:
    """Every Reservation: pending ones first, then those holding resources, invalid ones, and
    the ended; newest first within each (those without a creation time last)."""
    out = [_invalid_row(r) if isinstance(r, Invalid) else _row(r) for r in reservations]
    return sorted(out, key=lambda r: (_ORDER.get(r.phase, 2), -(r.created or 0.0), r.name))
