"""The `PodGroup` CR: a gang named by a CR instead of annotations, in either of two API groups.

- Koordinator's, `scheduling.sigs.k8s.io/v1alpha1`: pods join it through the
  `pod-group.scheduling.sigs.k8s.io` label;
- kubernetes-sigs/scheduler-plugins' ("upstream"), `scheduling.x-k8s.io/v1alpha1`: pods join it
  through the `scheduling.x-k8s.io/pod-group` label. Kubeflow's training operator and KubeRay
  create these.

Both have the same spec (`minMember`, `minResources`, `scheduleTimeoutSeconds`); `resource` says
which group an object is of. The scheduler's Coscheduling plugin reads the spec with each
project's semantics; the controller keeps `status` current, as each project's controller does
(the upstream status has no `scheduled` count but `occupiedBy`).

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
from apis.extension.names import GroupVersionResource
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
    #: Which API group the object is of: `names.POD_GROUPS` (Koordinator's) or
    #: `names.UPSTREAM_POD_GROUPS` (scheduler-plugins').
    resource: GroupVersionResource = names.POD_GROUPS
    min_member: int = 0
    min_resources: resources.ResourceList = field(default_factory=dict)
    schedule_timeout_seconds: int | None = None
    phase: PodGroupPhase = PodGroupPhase.PENDING
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    schedule_start_time: str = ""
    #: The owners of the pods, as scheduler-plugins' controller writes them (`ns/owner,...`).
    occupied_by: str = ""
    #: Whether `status.phase` was written at all (a missing one reads as Pending, but
    #: scheduler-plugins' controller writes Pending first); not part of equality.
    phase_given: bool = field(default=True, compare=False)

    @property
    def upstream(self) -> bool:
        """A scheduler-plugins PodGroup (`scheduling.x-k8s.io`)."""
        return self.resource == names.UPSTREAM_POD_GROUPS

    @classmethod
    def from_dict(cls, raw: object, resource: GroupVersionResource | None = None) -> PodGroup:
        """Parse a PodGroup of `resource`; None reads the group from `apiVersion` (Koordinator's
        when it names neither), for objects read from files."""
        d = f.mapping(raw, "podgroup")
        if resource is None:
            upstream = str(d.get("apiVersion", "")).startswith(names.UPSTREAM_SCHEDULING_GROUP + "/")
            resource = names.UPSTREAM_POD_GROUPS if upstream else names.POD_GROUPS
        meta = ObjectMeta.from_dict(d.get("metadata"))
        obj = f"podgroup {meta.key}"
        spec = f.mapping(d.get("spec"), "spec", obj)
        status = f.mapping(d.get("status"), "status", obj)
        min_member = f.integer(spec, "minMember", "spec", obj, 0) or 0
        timeout = f.integer(spec, "scheduleTimeoutSeconds", "spec", obj)
        written = f.string(status, "phase", "status", obj)
        phase_text = written or PodGroupPhase.PENDING.value
        try:
            phase = PodGroupPhase(phase_text)
        except ValueError:
            phase = PodGroupPhase.UNKNOWN
        counts = {
            k: f.integer(status, k, "status", obj, 0) or 0 for k in ("scheduled", "running", "succeeded", "failed")
        }
        return cls(
            meta=meta,
            resource=resource,
            min_member=min_member,
            min_resources=resources.parse_list(spec.get("minResources"), field="spec.minResources", obj=obj),
            schedule_timeout_seconds=timeout,
            phase=phase,
            schedule_start_time=f.string(status, "scheduleStartTime", "status", obj),
            occupied_by=f.string(status, "occupiedBy", "status", obj),
            phase_given=bool(written),
            **counts,
        )

    @classmethod
    def upstream_from_dict(cls, raw: object) -> PodGroup:
        """Parse a scheduler-plugins PodGroup (an informer's parser)."""
        return cls.from_dict(raw, names.UPSTREAM_POD_GROUPS)

    def to_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"minMember": self.min_member}
        if self.min_resources:
            spec["minResources"] = resources.format_list(self.min_resources)
        if self.schedule_timeout_seconds is not None:
            spec["scheduleTimeoutSeconds"] = self.schedule_timeout_seconds
        status: dict[str, Any] = {"phase": self.phase.value}
        if not self.upstream:
            status["scheduled"] = self.scheduled
        status.update(running=self.running, succeeded=self.succeeded, failed=self.failed)
        if self.schedule_start_time:
            status["scheduleStartTime"] = self.schedule_start_time
        if self.occupied_by:
            status["occupiedBy"] = self.occupied_by
        return {
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "metadata": self.meta.to_dict(),
            "spec": spec,
            "status": status,
        }
