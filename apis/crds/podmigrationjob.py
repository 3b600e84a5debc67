"""The `PodMigrationJob` CR (scheduling.koordinator.sh/v1alpha1, cluster-scoped, short name `pmj`):
one pod to move, safely.

Mode `ReservationFirst` (the default) first reserves room for the pod's replacement (a
Reservation whose owner is the pod's controller), waits until it is Available, only then evicts
the pod through the Eviction API, and succeeds when the replacement is bound onto the
Reservation. `EvictDirectly` only evicts. Whoever executes it writes `status`: the phase, the
step it is at (`status.status`, e.g. `ReservationCreated`), a reason and a message, and one
condition per step, with Koordinator's condition types and reasons below.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis import _fields as f
from apis.crds.reservation import ObjectRef
from apis.errors import ValidationError
from apis.extension import names
from apis.k8s.duration import format_duration, parse_duration
from apis.k8s.meta import Condition, ObjectMeta

__all__ = ["MigrationMode", "MigrationPhase", "PodMigrationJob"]

GROUP_VERSION = f"{names.SCHEDULING_DOMAIN}/v1alpha1"
KIND = "PodMigrationJob"
PLURAL = "podmigrationjobs"

#: `status.status` of a job that succeeded (Koordinator's controller writes it so).
STATUS_COMPLETE = "Complete"
# Condition types (one per step), also `status.status` while the step is worked on ...
CONDITION_RESERVATION_CREATED = "ReservationCreated"
CONDITION_RESERVATION_SCHEDULED = "ReservationScheduled"
CONDITION_EVICTION = "Eviction"
CONDITION_POD_SCHEDULED = "PodScheduled"
CONDITION_POD_BOUND_RESERVATION = "PodBoundReservation"
# ... and reasons, as Koordinator names them.
REASON_TIMEOUT = "Timeout"
REASON_FAILED_CREATE_RESERVATION = "FailedCreateReservation"
REASON_RESERVATION_EXPIRED = "ReservationExpired"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_FORBIDDEN_MIGRATE_POD = "ForbiddenMigratePod"
REASON_MISSING_POD = "MissingPod"
REASON_MISSING_RESERVATION = "MissingReservation"
REASON_EVICTING = "Evicting"
REASON_FAILED_EVICT = "FailedEvict"
REASON_EVICT_COMPLETE = "EvictComplete"
REASON_WAIT_FOR_POD_BIND_RESERVATION = "WaitForPodBindReservation"


class MigrationMode(enum.Enum):
    RESERVATION_FIRST = "ReservationFirst"
    EVICT_DIRECTLY = "EvictDirectly"


class MigrationPhase(enum.Enum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ABORTED = "Aborted"  # the user stopped it

    @property
    def terminal(self) -> bool:
        return self in (MigrationPhase.SUCCEEDED, MigrationPhase.FAILED, MigrationPhase.ABORTED)


@dataclass(frozen=True, slots=True)
class PodMigrationJob:
    meta: ObjectMeta
    pod_ref: ObjectRef
    mode: MigrationMode = MigrationMode.RESERVATION_FIRST
    paused: bool = False
    #: The whole job's deadline in seconds from creation; None: the executor's default.
    ttl_seconds: float | None = None
    #: An existing Reservation to use instead of creating one.
    reservation_ref: ObjectRef | None = None
    #: A Reservation template (`metadata` + `spec`) to create, overriding the executor's.
    reservation_template: Mapping[str, Any] = field(default_factory=dict)
    delete_options: Mapping[str, Any] = field(default_factory=dict)
    phase: MigrationPhase = MigrationPhase.PENDING
    status: str = ""
    reason: str = ""
    message: str = ""
    conditions: tuple[Condition, ...] = ()
    node_name: str = ""
    new_pod_ref: ObjectRef | None = None
    #: Why a value was read as its default ("" when none): an unknown `spec.mode`.
    ignored: str = field(default="", compare=False)

    @property
    def name(self) -> str:
        return self.meta.name

    @classmethod
    def from_dict(cls, raw: object) -> PodMigrationJob:
        d = f.mapping(raw, "podmigrationjob")
        meta = ObjectMeta.from_dict(d.get("metadata"))
        obj = f"podmigrationjob {meta.key}"
        spec = f.mapping(d.get("spec"), "spec", obj)
        status = f.mapping(d.get("status"), "status", obj)
        if spec.get("podRef") is None:
            raise ValidationError("spec.podRef", "is required", obj=obj)
        pod_ref = ObjectRef.from_dict(spec["podRef"], "spec.podRef", obj)
        if not pod_ref.uid and not (pod_ref.namespace and pod_ref.name):
            raise ValidationError("spec.podRef", "must name the pod (namespace and name, or uid)", obj=obj)
        mode_text = f.string(spec, "mode", "spec", obj) or MigrationMode.RESERVATION_FIRST.value
        ignored = ""
        try:
            mode = MigrationMode(mode_text)
        except ValueError:  # as Koordinator's controller: anything but EvictDirectly reserves first
            mode = MigrationMode.RESERVATION_FIRST
            ignored = f"spec.mode {mode_text!r} is not ReservationFirst or EvictDirectly: run as ReservationFirst"
        ttl_text = f.string(spec, "ttl", "spec", obj)
        ttl: float | None = None
        if ttl_text:
            try:
                ttl = parse_duration(ttl_text) or None
            except ValueError as e:
                raise ValidationError("spec.ttl", str(e), obj=obj) from None
        options = f.mapping(spec.get("reservationOptions"), "spec.reservationOptions", obj)
        phase_text = f.string(status, "phase", "status", obj, MigrationPhase.PENDING.value)
        try:
            phase = MigrationPhase(phase_text)
        except ValueError:
            raise ValidationError("status.phase", f"unknown phase {phase_text!r}", obj=obj) from None
        return cls(
            meta=meta,
            pod_ref=pod_ref,
            mode=mode,
            paused=f.boolean(spec, "paused", "spec", obj),
            ttl_seconds=ttl,
            reservation_ref=(
                ObjectRef.from_dict(options["reservationRef"], "spec.reservationOptions.reservationRef", obj)
                if options.get("reservationRef") is not None
                else None
            ),
            reservation_template=f.mapping(options.get("template"), "spec.reservationOptions.template", obj),
            delete_options=f.mapping(spec.get("deleteOptions"), "spec.deleteOptions", obj),
            phase=phase,
            status=f.string(status, "status", "status", obj),
            reason=f.string(status, "reason", "status", obj),
            message=f.string(status, "message", "status", obj),
            conditions=tuple(
                Condition.from_dict(c, f"status.conditions[{i}]", obj)
                for i, c in enumerate(f.items(status, "conditions", "status", obj))
            ),
            node_name=f.string(status, "nodeName", "status", obj),
            new_pod_ref=(
                ObjectRef.from_dict(status["podRef"], "status.podRef", obj)
                if status.get("podRef") is not None
                else None
            ),
            ignored=ignored,
        )

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def to_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"podRef": self.pod_ref.to_dict(), "mode": self.mode.value}
        if self.paused:
            spec["paused"] = True
        if self.ttl_seconds is not None:
            spec["ttl"] = format_duration(self.ttl_seconds)
        options: dict[str, Any] = {}
        if self.reservation_ref is not None:
            options["reservationRef"] = self.reservation_ref.to_dict()
        if self.reservation_template:
            options["template"] = dict(self.reservation_template)
        if options:
            spec["reservationOptions"] = options
        if self.delete_options:
            spec["deleteOptions"] = dict(self.delete_options)
        status = f.drop_empty(
            {
                "phase": self.phase.value,
                "status": self.status,
                "reason": self.reason,
                "message": self.message,
                "conditions": [c.to_dict() for c in self.conditions],
                "nodeName": self.node_name,
                "podRef": self.new_pod_ref.to_dict() if self.new_pod_ref is not None else None,
            }
        )
        meta = self.meta.to_dict()
        return {"apiVersion": GROUP_VERSION, "kind": KIND, "metadata": meta, "spec": spec, "status": status}
