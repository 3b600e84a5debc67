"""A PodGroup's next status from its members, with Koordinator's state machine:

    (none) → Pending
    Pending → PreScheduling        once at least minMember pods exist
    otherwise, with members:       Scheduling while fewer than minMember are bound (and
                                   scheduleStartTime is set the first time), else Scheduled;
                                   Running once running + succeeded ≥ minMember;
                                   Failed once a member failed and failed + running + succeeded
                                   ≥ minMember; Finished once succeeded ≥ minMember
    no members left → Pending

Pure: the reconciler brings the pods and the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from apis.crds.podgroup import PodGroup, PodGroupPhase
from apis.k8s.core import Pod

__all__ = ["GroupStatus", "next_status"]


@dataclass(frozen=True, slots=True)
class GroupStatus:
    phase: PodGroupPhase
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    schedule_start_time: str = ""

    @classmethod
    def of(cls, group: PodGroup) -> GroupStatus:
        return cls(
            group.phase, group.scheduled, group.running, group.succeeded, group.failed, group.schedule_start_time
        )

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "phase": self.phase.value,
            "scheduled": self.scheduled,
            "running": self.running,
            "succeeded": self.succeeded,
            "failed": self.failed,
        }
        if self.schedule_start_time:
            out["scheduleStartTime"] = self.schedule_start_time
        return out


def next_status(group: PodGroup, pods: Sequence[Pod], *, now: str) -> GroupStatus:
    """What `group`'s status should be given its member `pods`; `now` is an RFC 3339 time. A
    PodGroup without a status reads as Pending."""
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
