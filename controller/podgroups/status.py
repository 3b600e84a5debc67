"""A PodGroup's next status from its members, with Koordinator's state machine:

    (none) → Pending
    Pending → PreScheduling        once at least minMember pods exist
    otherwise, with members:       Scheduling while fewer than minMember are bound (and
                                   scheduleStartTime is set the first time), else Scheduled;
                                   Running once running + succeeded ≥ minMember;
                                   Failed once a member failed and failed + running + succeeded
                                   ≥ minMember; Finished once succeeded ≥ minMember
    no members left → Pending

`next_upstream_status` is scheduler-plugins' state machine for its PodGroups (`scheduling.x-k8s.io`),
as its controller (`pkg/controllers/podgroup_controller.go`) keeps them:

    (no phase) → Pending
    Pending → Scheduling           once at least minMember pods exist; occupiedBy = the owners
                                   of one member (`namespace/owner`, sorted, comma-joined)
    otherwise (counts updated):    Pending while fewer than minMember pods exist; else
                                   Scheduling while running + succeeded < minMember, Running
                                   once ≥; Failed once a member failed and failed + running +
                                   succeeded ≥ minMember; Finished once succeeded ≥ minMember
    Finished, Failed               final: never changed again

It counts the pods of the PodGroup's namespace (scheduler-plugins' controller lists the labelled
pods of every namespace, a defect), writes no `scheduled` count (that project removed it) and no
`scheduleStartTime` (it only reads it), as that controller does.

Pure: the reconciler brings the pods and the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from apis.crds.podgroup import PodGroup, PodGroupPhase
from apis.k8s.core import Pod

__all__ = ["GroupStatus", "next_status", "next_upstream_status"]


@dataclass(frozen=True, slots=True)
class GroupStatus:
    phase: PodGroupPhase
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    schedule_start_time: str = ""
    occupied_by: str = ""
    #: A scheduler-plugins PodGroup's status: no `scheduled` count.
    upstream: bool = False

    @classmethod
    def of(cls, group: PodGroup) -> GroupStatus:
        return cls(
            group.phase,
            group.scheduled,
            group.running,
            group.succeeded,
            group.failed,
            group.schedule_start_time,
            group.occupied_by,
            group.upstream,
        )

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"phase": self.phase.value}
        if not self.upstream:
            out["scheduled"] = self.scheduled
        out.update(running=self.running, succeeded=self.succeeded, failed=self.failed)
        if self.schedule_start_time:
            out["scheduleStartTime"] = self.schedule_start_time
        if self.occupied_by:
            out["occupiedBy"] = self.occupied_by
        return out


def next_status(group: PodGroup, pods: Sequence[Pod], *, now: str) -> GroupStatus:
    """What `group`'s status should be given its member `pods`; `now` is an RFC 3339 time. A
    PodGroup without a status reads as Pending. A scheduler-plugins PodGroup's is
    `next_upstream_status`'s. What this machine does not keep (occupiedBy) stays as it is."""
    if group.upstream:
        return next_upstream_status(group, pods)
    return replace(_koordinator(group, pods, now=now), occupied_by=group.occupied_by)


def _koordinator(group: PodGroup, pods: Sequence[Pod], *, now: str) -> GroupStatus:
    current = GroupStatus.of(group)
    minimum = group.min_member
    if current.phase is PodGroupPhase.PENDING:
        if len(pods) >= minimum > 0:
            return GroupStatus(PodGroupPhase.PRE_SCHEDULING, schedule_start_time=current.schedule_start_time)
        return current
    if not pods:
        return GroupStatus(PodGroupPhase.PENDING, schedule_start_time=current.schedule_start_time)
    running = sum(1 for p in pods if p.phase == "Running")
    succeeded = sum(1 for p in pods if p.phase == "Succeeded")
    failed = sum(1 for p in pods if p.phase == "Failed")
    scheduled = sum(1 for p in pods if p.node_name)
    start = current.schedule_start_time
    if scheduled < minimum:
        phase = PodGroupPhase.SCHEDULING
        start = start or now
    else:
        phase = PodGroupPhase.SCHEDULED
    if phase is PodGroupPhase.SCHEDULED and running + succeeded >= minimum:
        phase = PodGroupPhase.RUNNING
    if failed and failed + running + succeeded >= minimum:
        phase = PodGroupPhase.FAILED
    if succeeded >= minimum:
        phase = PodGroupPhase.FINISHED
    return GroupStatus(phase, scheduled, running, succeeded, failed, start)


def next_upstream_status(group: PodGroup, pods: Sequence[Pod]) -> GroupStatus:
    """scheduler-plugins' next status of its PodGroup `group` given its member `pods` (see the
    module docstring)."""
    current = GroupStatus.of(group)
    if current.phase in (PodGroupPhase.FINISHED, PodGroupPhase.FAILED):
        return current
    if not group.phase_given:
        return replace(current, phase=PodGroupPhase.PENDING)
    minimum = group.min_member
    if current.phase is PodGroupPhase.PENDING:
        if len(pods) < minimum:
            return current
        owners = _occupied_by(min(pods, key=lambda p: p.meta.name)) if pods else ""
        return replace(current, phase=PodGroupPhase.SCHEDULING, occupied_by=owners or current.occupied_by)
    running = sum(1 for p in pods if p.phase == "Running")
    succeeded = sum(1 for p in pods if p.phase == "Succeeded")
    failed = sum(1 for p in pods if p.phase == "Failed")
    if len(pods) < minimum:
        phase = PodGroupPhase.PENDING
    else:
        phase = PodGroupPhase.SCHEDULING if running + succeeded < minimum else PodGroupPhase.RUNNING
        if failed and failed + running + succeeded >= minimum:
            phase = PodGroupPhase.FAILED
        if succeeded >= minimum:
            phase = PodGroupPhase.FINISHED
    return replace(current, phase=phase, running=running, succeeded=succeeded, failed=failed)


def _occupied_by(pod: Pod) -> str:
    """`namespace/owner` of each of the pod's owners, sorted and comma-joined ("" when none)."""
    return ",".join(sorted(f"{pod.namespace}/{ref.name}" for ref in pod.meta.owner_references))
