"""The invariants' types: a violation, an invariant, the bounds, and persistence across checks."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cli.bench.soak.state import ClusterState

__all__ = ["Bounds", "Invariant", "Persistence", "Violation", "check"]


@dataclass(frozen=True, slots=True, order=True)
class Violation:
    """One broken invariant, naming the objects involved (`namespace/pod`, `node/gpu-3`, a quota)."""

    invariant: str
    objects: tuple[str, ...]
    message: str = field(compare=False)

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        """The same broken invariant on the same objects, across checks (the message may change)."""
        return (self.invariant, self.objects)

    def to_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "objects": list(self.objects), "message": self.message}


@dataclass(frozen=True, slots=True)
class Bounds:
    """How long liveness may take, in seconds, derived from the soak's settings."""

    #: A pod that fits is bound within this long of its creation or of the last disturbance.
    pending_s: float = 30.0
    #: The waiting time the soak's gangs ask for (`gang.scheduling.koordinator.sh/waiting-time`).
    gang_waiting_s: float = 30.0
    #: A Strict gang is whole or unbound within its waiting time plus this.
    gang_slack_s: float = 30.0
    #: The scheduler has seen a Device CR's health change within this long.
    health_s: float = 10.0
    #: A Deployment's pods are within replicas + maxSurge this long after the last disturbance.
    workload_settle_s: float = 10.0
    #: Longer than a soak Job's pods run (`apps.JOB_RUN_S`), added to a Job's bound.
    job_run_s: float = 5.0
    #: The soak's pods tolerate an unreachable node this long (tolerationSeconds), then go.
    eviction_s: float = 8.0
    #: An Available Reservation past its expiry is marked expired within this long.
    reservation_expiry_s: float = 10.0
    #: A PodMigrationJob's deadline when its `spec.ttl` is unset (the descheduler's `--default-ttl`).
    migration_default_ttl_s: float = 300.0
    #: A PodMigrationJob is finished within this long after its deadline (and the last kill).
    migration_slack_s: float = 30.0
    #: A Deployment is back to replicas − maxUnavailable ready pods this long after a disturbance.
    migration_settle_s: float = 15.0
    #: The quota controller's reclaim grace period (what `tessera up` gives it).
    reclaim_grace_s: float = 30.0
    #: What checks cannot see of a quota's overuse: between two checks, and an Event's whole seconds.
    reclaim_slack_s: float = 6.0


@dataclass(frozen=True, slots=True)
class Invariant:
    name: str
    check: Callable[[ClusterState], list[Violation]]
    #: 0: counts at once; else only once seen continuously for this long (see the module docstring).
    grace_s: float = 0.0
    #: Only kills restart its grace, not node losses: it is about what happens while a node is lost.
    during_node_loss: bool = False


def check(invariants: Iterable[Invariant], state: ClusterState) -> dict[str, list[Violation]]:
    """Each invariant's violations in `state`, by invariant name (every name present)."""
    return {invariant.name: sorted(invariant.check(state)) for invariant in invariants}


class Persistence:
    """Across checks: which violations have lasted their invariant's grace, so they count.

    A violation is a candidate from the first check that sees it; it counts once it has been
    seen in every check since, for `grace_s` measured from the later of its first sighting and
    the last disturbance (for an invariant `during_node_loss`, the last kill). A check that does not
    see it drops it. Counted violations are kept
    (the first sighting of each key, with the message it had then).
    """

    def __init__(self, invariants: Iterable[Invariant]) -> None:
        self._grace = {i.name: i.grace_s for i in invariants}
        self._during_node_loss = {i.name for i in invariants if i.during_node_loss}
        self._first_seen: dict[tuple[str, tuple[str, ...]], float] = {}
        self.counted: dict[tuple[str, tuple[str, ...]], Violation] = {}

    def update(
        self,
        found: dict[str, list[Violation]],
        *,
        now: float,
        calm_since: float,
        kills_calm_since: float | None = None,
    ) -> list[Violation]:
        """Record one check's findings; the violations that count for the first time.
        `kills_calm_since`: the last kill's return alone, for invariants judged during node losses
        (None: `calm_since`)."""
        seen = {v.key: v for violations in found.values() for v in violations}
        self._first_seen = {key: self._first_seen.get(key, now) for key in seen}
        new = []
        for key, violation in seen.items():
            if key in self.counted:
                continue
            calm = kills_calm_since if key[0] in self._during_node_loss and kills_calm_since is not None else calm_since
            since = max(self._first_seen[key], calm) if self._grace.get(key[0], 0.0) else now
            if now - since >= self._grace.get(key[0], 0.0):
                self.counted[key] = violation
                new.append(violation)
        return new

    @property
    def candidates(self) -> int:
        """Violations seen in the last check that do not count (yet)."""
        return sum(1 for key in self._first_seen if key not in self.counted)
