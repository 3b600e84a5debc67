"""The `PodGroup` CR (scheduling.sigs.k8s.io/v1alpha1): a gang named by a CR instead of annotations.

Pods join it through the `pod-group.scheduling.sigs.k8s.io` label. The scheduler's Coscheduling
plugin reads `minMember` and the timeout; the controller keeps `status` (phase and member
counts) current.

Parsed as Koordinator's schema admits it: `minMember` and `scheduleTimeoutSeconds` may be 0 or
negative (missing `minMember` is 0, Go's zero value) — what that means is the gang's business
(`apis.extension.gang.spec_from_pod_group` falls back as Koordinator does, with a warning) —
and a phase this code does not know reads as Unknown.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from apis import _fields as f
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
    min_member: int = 0
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
        min_member = f.integer(spec, "minMember", "spec", obj, 0) or 0
        timeout = f.integer(spec, "scheduleTimeoutSeconds", "spec", obj)
        phase_text = f.string(status, "phase", "status", obj) or PodGroupPhase.PENDING.value
        try:
            phase = PodGroupPhase(phase_text)
        except ValueError:
            phase = PodGroupPhase.UNKNOWN
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
