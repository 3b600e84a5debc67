"""Health: no new placement on a GPU its Device CR calls unhealthy.

Pods placed before a GPU failed stay where they are (Kubernetes does not move running pods); a pod
created after the soak saw the GPU unhealthy, plus `Bounds.health_s` for the scheduler to see the
Device CR change too, must not be given it. The soak notices a failure at its check cadence, so
`unhealthy_since` is never earlier than the failure: the check errs on the side of no violation.
"""

from __future__ import annotations

from apis.crds.device import DeviceType
from cli.bench.soak.holdings import holdings
from cli.bench.soak.invariants.base import Bounds, Invariant, Violation
from cli.bench.soak.state import ClusterState, created_at

__all__ = ["invariants", "placed_on_unhealthy"]


def invariants(bounds: Bounds) -> list[Invariant]:
    return [Invariant("placed-on-unhealthy-gpu", lambda state: placed_on_unhealthy(state, bounds.health_s))]


def placed_on_unhealthy(state: ClusterState, seen_within_s: float) -> list[Violation]:
    held, _ = holdings(state.pods)
    pods = {p.key: p for p in state.pods}
    violations = []
    for h in held:
        since = state.unhealthy_since.get((h.node, h.minor)) if h.type is DeviceType.GPU else None
        if since is None:
            continue
        created = created_at(pods[h.pod], state)
        if created >= since + seen_within_s:
            violations.append(
                Violation(
                    "placed-on-unhealthy-gpu",
                    (h.device, h.pod),
                    f"{h.pod}, created {created - since:.1f} s after {h.device} was seen unhealthy, was given it",
                )
            )
    return violations
