"""Pods held at Permit: each waits until every plugin that said WAIT allows it, one rejects it,
or its time is up (gang scheduling holds members here until the gang is complete).

No threads and no clock: deadlines are absolute times from the caller's clock, and the caller
expires them (`Framework.expire_waiting(now)`). The scheduling cycle (`scheduler.core.cycle`)
polls `decision` in `resolve_waiting` and binds or undoes the pod.
"""

from __future__ import annotations

from scheduler.cache import PodInfo
from scheduler.framework.status import SUCCESS, Status

__all__ = ["MAX_PERMIT_TIMEOUT", "WaitingPod"]

#: kube-scheduler's upper bound for one Permit wait, in seconds.
MAX_PERMIT_TIMEOUT = 15 * 60.0


class WaitingPod:
    """A pod reserved on `node` and waiting at Permit."""

    __slots__ = ("_decision", "node", "pending", "pod")

    def __init__(self, pod: PodInfo, node: str, pending: dict[str, float]) -> None:
        self.pod = pod
        self.node = node
        #: plugin name -> deadline (absolute seconds on the caller's clock)
        self.pending = pending
        self._decision: Status | None = None

    @property
    def decision(self) -> Status | None:
        """None while waiting; SUCCESS once every plugin allowed; a rejection otherwise."""
        return self._decision

    @property
    def deadline(self) -> float:
        return min(self.pending.values(), default=0.0)

    def allow(self, plugin: str) -> None:
        """A plugin lets the pod go. Once all have, the decision is SUCCESS."""
        if self._decision is not None:
            return
        self.pending.pop(plugin, None)
        if not self.pending:
            self._decision = SUCCESS

    def reject(self, plugin: str, reason: str) -> None:
        """A plugin rejects the pod; the first decision stands."""
        if self._decision is None:
            self._decision = Status.unschedulable(reason, plugin=plugin)

    def expire(self, now: float) -> bool:
        """Reject if a plugin's deadline has passed; returns whether it did."""
        if self._decision is not None:
            return False
        late = sorted(p for p, deadline in self.pending.items() if deadline <= now)
        if not late:
            return False
        self._decision = Status.unschedulable(
            f"rejected due to timeout after waiting at permit by {late[0]}", plugin=late[0]
        )
        return True
