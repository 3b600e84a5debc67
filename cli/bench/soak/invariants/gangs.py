"""Gangs: a Strict gang is wholly bound or wholly unbound once its waiting time has passed.

Binding a gang is not atomic (each member is its own binding), so a gang is half bound for a
moment on every placement; it is a violation only when it stays so past the gang's waiting time
plus `Bounds.gang_slack_s` (the grace `Persistence` applies). Members being deleted do not count:
the soak retires a gang by deleting all of it. A gang whose members name no min-available (a
PodGroup CR's gang) is judged against the members that exist.
"""

from __future__ import annotations

from collections import defaultdict

from apis.errors import AnnotationError
from apis.extension.gang import GangMode, GangSpec, gang_from_pod
from apis.k8s.core import Pod
from cli.bench.soak.invariants.base import Bounds, Invariant, Violation
from cli.bench.soak.state import ClusterState

__all__ = ["half_bound", "invariants", "strict_gangs"]


def invariants(bounds: Bounds) -> list[Invariant]:
    return [Invariant("gang-half-bound", half_bound, grace_s=bounds.gang_waiting_s + bounds.gang_slack_s)]


def strict_gangs(pods: tuple[Pod, ...]) -> dict[str, tuple[GangSpec, list[Pod]]]:
    """Strict gangs by name, with their live members (not terminal, not being deleted)."""
    gangs: dict[str, tuple[GangSpec, list[Pod]]] = {}
    members: dict[str, list[Pod]] = defaultdict(list)
    for pod in pods:
        if pod.is_terminal or pod.is_deleting:
            continue
        try:
            spec = gang_from_pod(pod)
        except AnnotationError:
            continue  # the scheduler refuses it with the reason; nothing is bound
        if spec is None or spec.mode is not GangMode.STRICT:
            continue
        gangs.setdefault(spec.name, (spec, members[spec.name]))
        members[spec.name].append(pod)
    return gangs


def half_bound(state: ClusterState) -> list[Violation]:
    violations = []
    for name, (spec, members) in strict_gangs(state.pods).items():
        bound = sorted(p.key for p in members if p.node_name)
        needed = spec.min_available or len(members)
        if 0 < len(bound) < needed:
            pending = sorted(p.key for p in members if not p.node_name)
            violations.append(
                Violation(
                    "gang-half-bound",
                    (f"gang {name}", *bound, *pending),
                    f"Strict gang {name} has {len(bound)} of its min-available {needed} bound "
                    f"({', '.join(bound)}); pending: {', '.join(pending) or 'none'}",
                )
            )
    return violations
