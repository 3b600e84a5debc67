"""What a PostFilter decided to evict so a pod fits: the nominated node and the victims.

The framework is pure, so a PostFilter never evicts anything itself: it writes its decision
into the cycle state (`CycleState.preemption`), the runtime returns it with the failed
`ScheduleResult`, and whoever runs the cycle acts on it — the live scheduler nominates the pod
and evicts the victims through the API, off the scheduling thread; offline callers report it.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.cache import PodInfo

__all__ = ["Preemption"]


@dataclass(frozen=True, slots=True)
class Preemption:
    """Evict `victims` (all on `node`) so the pod fits there; `plugin` decided, `reason` says
    what the room is needed for (for events and logs)."""

    node: str
    victims: tuple[PodInfo, ...]
    plugin: str
    reason: str

    def describe(self) -> str:
        """`3 pods on n1 (quota team-a): ns/a, ns/b, ns/c`: for events and logs."""
        listed = ", ".join(v.key for v in self.victims)
        count = f"{len(self.victims)} pod{'s' if len(self.victims) != 1 else ''}"
        return f"{count} on {self.node} ({self.reason}): {listed}"
