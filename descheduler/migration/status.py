"""A PodMigrationJob's status as the descheduler writes it: phase, the step it is at, a reason
and message, one condition per step (Koordinator's types and reasons, from
`apis.crds.podmigrationjob`), the node its replacement was reserved on and the replacement pod.

`JobStatus.of(job)` reads what is there; `with_condition` replaces one condition, keeping its
transition time when its status did not change; `to_dict` is the merge patch's `status`.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, replace
from typing import Any

from apis.crds import podmigrationjob as pmj
from apis.crds.podmigrationjob import MigrationPhase, PodMigrationJob
from apis.crds.reservation import ObjectRef
from apis.k8s.meta import Condition

__all__ = ["JobStatus", "quoted", "stamp", "step_events"]


def stamp(now: datetime.datetime) -> str:
    """A time as Kubernetes writes it in conditions."""
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class JobStatus:
    phase: MigrationPhase = MigrationPhase.PENDING
    status: str = ""
    reason: str = ""
    message: str = ""
    conditions: tuple[Condition, ...] = ()
    node_name: str = ""
    pod_ref: ObjectRef | None = None

    @classmethod
    def of(cls, job: PodMigrationJob) -> JobStatus:
        return cls(job.phase, job.status, job.reason, job.message, job.conditions, job.node_name, job.new_pod_ref)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def is_true(self, type_: str) -> bool:
        c = self.condition(type_)
        return c is not None and c.status == "True"

    @property
    def evicting_or_evicted(self) -> bool:
        """The pod was evicted: Koordinator's Eviction condition, False with reason Evicting
        while the pod goes, True (EvictComplete) once it is gone."""
        c = self.condition(pmj.CONDITION_EVICTION)
        return c is not None and (c.status == "True" or c.reason == pmj.REASON_EVICTING)

    def with_condition(self, type_: str, status: bool, *, reason: str = "", message: str = "", now: str) -> JobStatus:
        text = "True" if status else "False"
        old = self.condition(type_)
        since = old.last_transition_time if old is not None and old.status == text else now
        new = Condition(type_, text, reason, message, since)
        kept = tuple(c for c in self.conditions if c.type != type_)
        return replace(self, conditions=(*kept, new))

    def at(self, phase: MigrationPhase, status: str, *, reason: str = "", message: str = "") -> JobStatus:
        return replace(self, phase=phase, status=status, reason=reason, message=message)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "phase": self.phase.value,
            "status": self.status or None,
            "reason": self.reason or None,
            "message": self.message or None,
            "conditions": [c.to_dict() for c in self.conditions] or None,
            "nodeName": self.node_name or None,
            "podRef": self.pod_ref.to_dict() if self.pod_ref is not None else None,
        }
        return out


def step_events(old: JobStatus, new: JobStatus, *, reservation: str, pod: str) -> list[tuple[str, str]]:
    """Koordinator's Normal Events (reason, message) for the steps `new` reached that `old` had
    not: the Reservation scheduled, the evicted pod gone, the wait for the replacement's bind."""
    out = []
    scheduled, eviction = pmj.CONDITION_RESERVATION_SCHEDULED, pmj.CONDITION_EVICTION
    if new.is_true(scheduled) and not old.is_true(scheduled):
        out.append((scheduled, f"Assigned Reservation {quoted(reservation)} to node {quoted(new.node_name)}"))
    if new.is_true(eviction) and not old.is_true(eviction):
        out.append((pmj.REASON_EVICT_COMPLETE, f"Pod {quoted(pod)} has been evicted"))
    waiting = pmj.REASON_WAIT_FOR_POD_BIND_RESERVATION
    bound, was = new.condition(pmj.CONDITION_POD_BOUND_RESERVATION), old.condition(pmj.CONDITION_POD_BOUND_RESERVATION)
    if bound is not None and bound.reason == waiting and (was is None or was.reason != waiting):
        out.append((waiting, bound.message))
    return out


def quoted(text: str) -> str:
    """A name as Go's %q writes it, as Koordinator's messages show names."""
    return json.dumps(text)
