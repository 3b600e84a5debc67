"""Reclaim, pure: when a quota has used more than its runtime for long enough, which pods go.

A quota borrows idle resources up to its runtime; when the lender's pods arrive, the lender's
request rises, the borrower's runtime falls below what it uses, and the scheduler alone cannot
give the lender its guarantee back (the borrower's pods hold the nodes). After a grace period
(`OveruseTimer`) the controller evicts the borrower's pods that `plan` names:

- only bound, preemptible pods (`quota.scheduling.koordinator.sh/preemptible: "false"` protects
  a pod) that are not already on their way out, and only pods that ask for a resource the quota
  is over in;
- lowest priority first, then the newest first (the least work lost), then by name;
- and only as many as it takes: planning stops as soon as used ≤ runtime in every resource, so
  the last pod evicted would not fit again at once (no thrash).

Plain data in, plain data out: the reconciler brings the pods, the clock and the API calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from apis.k8s import resources

__all__ = ["Candidate", "OveruseTimer", "Plan", "over", "plan"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pod of the quota that could be evicted, as the plan sees it."""

    key: str
    priority: int
    #: RFC 3339 creation time (they sort as strings).
    created: str
    #: What the pod is charged against the quota (`apis.quota.quota_request`).
    request: Mapping[str, int]
    preemptible: bool = True


@dataclass(frozen=True, slots=True)
class Plan:
    #: In the order to evict them.
    victims: tuple[Candidate, ...]
    #: The quota's used once they are gone.
    used_after: dict[str, int]
    #: Resources still above runtime after every possible eviction (non-preemptible pods hold them).
    still_over: dict[str, int] = field(default_factory=dict)


def over(used: Mapping[str, int], runtime: Mapping[str, int]) -> dict[str, int]:
    """By how much `used` exceeds `runtime`, per resource the quota limits (runtime's keys)."""
    return {r: used.get(r, 0) - limit for r, limit in runtime.items() if used.get(r, 0) > limit}


def plan(used: Mapping[str, int], runtime: Mapping[str, int], candidates: Iterable[Candidate]) -> Plan:
    """The pods to evict so that `used` ≤ `runtime` (module docstring for the order and limits)."""
    excess = over(used, runtime)
    left = dict(used)
    victims: list[Candidate] = []
    ordered = sorted((c for c in candidates if c.preemptible), key=lambda c: c.key)
    ordered.sort(key=lambda c: c.created, reverse=True)  # newest first among equals (stable sorts)
    ordered.sort(key=lambda c: c.priority)
    for candidate in ordered:
        if not excess:
            break
        if not any(candidate.request.get(r, 0) > 0 for r in excess):
            continue  # evicting it would give back nothing the quota is over in
        victims.append(candidate)
        left = resources.sub(left, candidate.request)
        excess = over(left, runtime)
    return Plan(tuple(victims), left, excess)


class OveruseTimer:
    """Since when each quota has been over its runtime, without a break.

    `observe` is told at each look whether the quota is over now; a quota that dips back under
    starts again from zero the next time it goes over (a short spike never reclaims).
    """

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self._since: dict[str, float] = {}

    def observe(self, quota: str, is_over: bool, now: float) -> float | None:
        """None when the quota is not over; else the seconds left of its grace (≤ 0: reclaim now)."""
        if not is_over:
            self._since.pop(quota, None)
            return None
        since = self._since.setdefault(quota, now)
        return since + self.grace - now

    def since(self, quota: str) -> float | None:
        return self._since.get(quota)

    def forget(self, quota: str) -> None:
        self._since.pop(quota, None)

    def clear(self) -> None:
        """Every quota starts its grace again (reclaim resumed after a pause)."""
        self._since.clear()
