"""Per-cycle state of NodeAffinity: the nodes matching the pod's selector and required affinity."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.framework.cycle_state import StateData


@dataclass(frozen=True, slots=True)
class AffinityState(StateData):
    matching: frozenset[str]
