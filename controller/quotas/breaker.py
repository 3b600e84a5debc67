"""Reclaim's circuit breaker, pure: no mass eviction because the figures jumped.

Reclaim is the only thing in Tessera that deletes users' pods on its own, and it acts on
runtimes: if a bug, a bad edit or a cluster event makes the runtimes collapse, every quota is
over its runtime at once and reclaim would evict everybody, which is the worst a quota system
can do. Kubernetes' node lifecycle controller guards its own evictions the same way: when too
large a part of a zone looks unhealthy at once it stops evicting there, since a mass failure is
likelier a fault of its own view than of every node.

The controller feeds `Breaker.step` the tree's figures after every change it sees (one informer
event, or a batch the manager computed together: a *step*):

- `root`: the root quota's total (the cluster less what pods outside the tree use), per resource;
- `excess`: what reclaim would take back now — over the leaf quotas, Σ max(0, used − runtime) —
  per resource.

It trips when one step
- makes the root's total fall by more than `root_drop` (default 0.5) of what it was in some
  resource (`RootTotalCollapsed`), or
- makes the excess rise by more than `excess_rise` (default 0.3) of the root's total in some
  resource (`MassOveruse`: runtimes dropping below what many pods use in one go).

A legitimate lender arriving raises the excess by the pods it brings, one or a few at a time, so
a step of a third of the cluster is not the way normal reclaim begins. While open (tripped) the
breaker allows no eviction. It closes again (resumes)

- by itself, once no step has been too large for `stable` seconds (default 60) and — when the
  root's total collapsed — that total is back above (1 − root_drop) of what it was before;
- when an operator says so (`resume`): the figures as they are now become the reference.

A breaker that starts open because the quotas say reclaim was paused (a restarted controller,
`restore`) cannot know the root's total from before: paused for a collapse, only an operator
resumes it; paused for a mass overuse, it resumes after `stable` seconds like any other.

Plain data in, plain data out: the reconciler brings the figures, the clock and the writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from apis.k8s import resources

__all__ = [
    "REASON_MASS_OVERUSE",
    "REASON_OPERATOR",
    "REASON_ROOT_COLLAPSED",
    "REASON_STABLE",
    "Breaker",
    "BreakerSettings",
    "Exposure",
    "Figures",
    "Trip",
]

REASON_ROOT_COLLAPSED: Final = "RootTotalCollapsed"
REASON_MASS_OVERUSE: Final = "MassOveruse"
#: Why it closed again.
REASON_STABLE: Final = "FiguresStable"
REASON_OPERATOR: Final = "ResumedByOperator"


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    #: A step that lowers the root's total by more than this fraction (of what it was) trips.
    root_drop: float = 0.5
    #: A step that raises the excess by more than this fraction of the root's total trips.
    excess_rise: float = 0.3
    #: Seconds without a step too large before the breaker closes by itself.
    stable: float = 60.0
    #: False: never trips (reclaim as before; not recommended).
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class Figures:
    """One step's view of the tree, per resource (base units)."""

    root: Mapping[str, int] = field(default_factory=dict)
    excess: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Trip:
    """Why reclaim is paused: `reason` (`RootTotalCollapsed`, `MassOveruse`), a message naming
    the figures, and since when (`since` the clock's, `at` RFC 3339)."""

    reason: str
    message: str
    since: float
    at: str
    #: The figures before the step that tripped it (None when restored after a restart).
    before: Figures | None = None


class Exposure:
    """The excess of `Figures`: per leaf quota what it uses above its runtime, and their sum,
    kept so that a step costs the quotas that changed, not the whole tree."""

    def __init__(self) -> None:
        self._per: dict[str, dict[str, int]] = {}
        self._total: dict[str, int] = {}

    def set(self, quota: str, excess: Mapping[str, int] | None) -> None:
        """The quota's excess now (None or empty: none, or no longer a leaf)."""
        old = self._per.pop(quota, None)
        if old:
            self._total = {r: v for r, v in resources.sub(self._total, old).items() if v}
        if excess:
            self._per[quota] = dict(excess)
            self._total = resources.add(self._total, excess)

    @property
    def total(self) -> dict[str, int]:
        return dict(self._total)

    def of(self, quota: str) -> dict[str, int]:
        return dict(self._per.get(quota, {}))

    def over(self) -> list[str]:
        """The leaf quotas above their runtime now, by name."""
        return sorted(self._per)


class Breaker:
    """See the module docstring. Not thread-safe: its owner serialises calls."""

    def __init__(self, settings: BreakerSettings, *, clock: Callable[[], float], now: Callable[[], str]) -> None:
        self.settings = settings
        self._clock = clock
        self._now = now
        self._last: Figures | None = None
        self.trip: Trip | None = None
        #: When the last step too large was seen (the stable period counts from there).
        self._disturbed = 0.0
        #: Why it last closed (for the condition), and how often it tripped.
        self.closed_reason = ""
        self.trips = 0

    @property
    def is_open(self) -> bool:
        return self.trip is not None

    def step(self, figures: Figures) -> Trip | None:
        """Take one step's figures; the new Trip when this step trips the breaker, else None."""
        last, self._last = self._last, figures
        if last is None or not self.settings.enabled:
            return None
        why = self._too_large(last, figures)
        if why is None:
            return None
        self._disturbed = self._clock()
        if self.trip is not None:
            return None  # already open: the stable period starts again
        reason, message = why
        self.trip = Trip(reason, message, self._disturbed, self._now(), before=last)
        self.trips += 1
        return self.trip

    def _too_large(self, before: Figures, after: Figures) -> tuple[str, str] | None:
        for r, was in sorted(before.root.items()):
            if r not in after.root:
                continue  # no quota limits it any more (the last one went): not a collapse
            now = after.root[r]
            if was > 0 and was - now > self.settings.root_drop * was:
                return REASON_ROOT_COLLAPSED, (
                    f"the root quota's total of {r} fell from {resources.format_quantity(r, was)} to "
                    f"{resources.format_quantity(r, now)} in one step (more than "
                    f"{self.settings.root_drop:.0%} of it): every quota's runtime fell with it"
                )
        for r in sorted(set(before.excess) | set(after.excess)):
            rise = after.excess.get(r, 0) - before.excess.get(r, 0)
            total = max(before.root.get(r, 0), after.root.get(r, 0))
            if rise > 0 and rise > self.settings.excess_rise * total:
                return REASON_MASS_OVERUSE, (
                    f"one step put {resources.format_quantity(r, rise)} of {r} in use above the quotas' runtimes "
                    f"(more than {self.settings.excess_rise:.0%} of the tree's "
                    f"{resources.format_quantity(r, total)}): reclaim would evict that much at once"
                )
        return None

    def allows(self) -> bool:
        """Whether reclaim may evict now; closes the breaker when its figures are stable again."""
        trip = self.trip
        if trip is None:
            return True
        if self._clock() - max(self._disturbed, trip.since) < self.settings.stable:
            return False
        if trip.reason == REASON_ROOT_COLLAPSED and (trip.before is None or not self._recovered(trip.before)):
            return False
        self._close(REASON_STABLE)
        return True

    def _recovered(self, before: Figures) -> bool:
        now = self._last.root if self._last is not None else {}
        floor = 1 - self.settings.root_drop
        return all(now.get(r, 0) >= floor * was for r, was in before.root.items())

    def resume(self) -> bool:
        """An operator's word: close now, the current figures as the reference. False when it
        was not open."""
        if self.trip is None:
            return False
        self._close(REASON_OPERATOR)
        return True

    def restore(self, reason: str, message: str, at: str) -> None:
        """Start open, as the quotas say a controller before this one left it (`at`: since when,
        RFC 3339)."""
        if self.trip is None and self.settings.enabled:
            self.trip = Trip(reason, message, self._clock(), at or self._now())
            self._disturbed = self.trip.since
            self.trips += 1

    def _close(self, reason: str) -> None:
        self.trip = None
        self.closed_reason = reason
