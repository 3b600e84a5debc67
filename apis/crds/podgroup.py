"""The `PodGroup` CR (scheduling.sigs.k8s.io/v1alpha1): a gang named by a CR instead of annotations.

Pods join it through the `pod-group.scheduling.sigs.k8s.io` label. The scheduler's Coscheduling
plugin reads `minMember` and the timeout; the controller keeps `status` (phase and member
counts) current.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from apis import _fields as f
from apis.errors import ValidationError
from apis.extension import names
from apis.k8s import resources
from apis.k8s.meta import ObjectMeta

__all__ = ["PodGroup", "PodGroupPhase"]


class PodGroupPhase(enum.Enum):
    PENDING = "Pending"
    PRE_SCHEDULING = "PreScheduling"
    SCHEDULING = "Scheduling"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    FINISHED = "Finished"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class PodGroup:
    meta: ObjectMeta
    min_member: int = 1
    min_resources: resources.ResourceList = field(default_factory=dict)
    schedule_timeout_seconds: int | None = None
    phase: PodGroupPhase = PodGroupPhase.PENDING
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    schedule_start_time: str = ""

    @classmethod
    def from_dict(cls, raw: object) -> PodGroup:
        d = f.mapping(raw, "podgroup")
        meta = ObjectMeta.from_dict(d.get("metadata"))
        obj = f"podgroup {meta.key}"
        spec = f.mapping(d.get("spec"), "spec", obj)
        status = f.mapping(d.get("status"), "status", obj)
        min_member = f.integer(spec, "minMember", "spec", obj, 1)
        if min_member is None or min_member < 1:
            raise ValidationError("spec.minMember", f"must be at least 1, got {min_member}", obj=obj)
        timeout = f.integer(spec, "scheduleTimeoutSeconds", "spec", obj)
        if timeout is not None and timeout <= 0:
            raise ValidationError("spec.scheduleTimeoutSeconds", f"must be positive, got {timeout}", obj=obj)
        phase_text = f.string(status, "phase", "status", obj, PodGroupPhase.PENDING.value)
        try:
            phase = PodGroupPhase(phase_text)
        except ValueError:
            raise ValidationError("status.phase", f"unknown phase {phase_text!r}", obj=obj) from None
        counts = {
            k: f.integer(status, k, "status", obj, 0) or 0 for k in ("scheduled", "running", "succeeded", "failed")
        }
        return cls(
            meta=meta,
            min_member=min_member,
            min_resources=resources.parse_list(spec.get("minResources"), field="spec.minResources", obj=obj),
            schedule_timeout_seconds=timeout,
            phase=phase,
            schedule_start_time=f.string(status, "scheduleStartTime", "status", obj),
            **counts,
        )

    def to_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"minMember": self.min_member}
        if self.min_resources:
            spec["minResources"] = resources.format_list(self.min_resources)
        if self.schedule_timeout_seconds is not None:
            spec["scheduleTimeoutSeconds"] = self.schedule_timeout_seconds
        status: dict[str, Any] = {
            "phase": self.phase.value,
            "scheduled": self.scheduled,
            "running": self.running,
            "succeeded": self.succeeded,
            "failed": self.failed,
        }
        if self.schedule_start_time:
            status["scheduleStartTime"] = self.schedule_start_time
        return {
            "apiVersion": names.POD_GROUPS.api_version,
            "kind": names.POD_GROUPS.kind,
            "metadata": self.meta.to_dict(),
            "spec": spec,
            "status": status,
        }
