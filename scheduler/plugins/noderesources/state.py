"""Per-cycle state of NodeResourcesFit: what to check and what to score, computed once per pod."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.framework.cycle_state import StateData


@dataclass(frozen=True, slots=True)
class FitState(StateData):
    #: (resource, requested amount) for every non-zero, non-ignored resource of the pod.
    checks: tuple[tuple[str, int], ...]
    #: The pod's request per scoring resource (CPU and memory with kube's non-zero defaults).
    score_request: tuple[int, ...]
    #: The pod's resources a DeviceClass serves (`scheduler.framework.extended`) -> the class: on
    #: a node that serves them through DRA they are not checked against its allocatable.
    dra: tuple[tuple[str, str], ...] = ()
