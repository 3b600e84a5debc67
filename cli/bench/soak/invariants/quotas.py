"""Quotas: what each quota's pods use stays within its max, its runtime too, the status the
controller writes matches what its pods use, and reclaim evicts only from quotas over their
runtime for its whole grace period.

Everything is recomputed with `kube.quotas.QuotaManager` — the code the scheduler and the controller
share — from the API server's quotas, pods and nodes: used is the sum of the bound pods' quota
charges (every GPU spelling counted as `apis.extension.quotacount` says), runtime the tree's share
of the nodes' allocatable. With the ElasticQuota plugin on, the scheduler admits a pod only when
`used + request ≤ runtime ≤ max`, so a bound set above max is a quota leak, whatever happened in
between (a scheduler killed between Reserve and Bind, a restart that lost a charge) — unless a
quota edit lowered max below what its pods use, which reclaim must take back within its grace.

`status.used` is checked once a quota has one, with the grace a controller needs. Reclaim's
evictions are read from their `ReclaimedByQuota` Events and judged against the record of which
quotas every check saw over their from-scratch runtime (`ClusterState.overuse`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from apis.crds.elasticquota import ElasticQuota
from apis.k8s.core import Node, Pod
from apis.quota import capacity_of
from cli.bench.soak.invariants.base import Bounds, Invariant, Violation
from cli.bench.soak.state import ClusterState
from kube.quotas import QuotaManager

__all__ = ["invariants", "manager_of", "over_runtime"]


def invariants(bounds: Bounds) -> list[Invariant]:
    return [
        # A quota edit may lower max below what its pods use: reclaim takes it back after its
        # grace period (runtime ≤ max), so only what lasts longer is a leak.
        Invariant("quota-used-over-max", used_over_max, grace_s=bounds.reclaim_grace_s + bounds.pending_s),
        Invariant("quota-runtime-over-max", runtime_over_max),
        Invariant("quota-status-used", status_used, grace_s=bounds.pending_s),
        Invariant(
            "quota-reclaim-without-overuse", reclaim_without_overuse(bounds.reclaim_grace_s, bounds.reclaim_slack_s)
        ),
    ]


def _manager(quotas: Iterable[ElasticQuota], nodes: Iterable[Node], pods: Iterable[Pod]) -> QuotaManager:
    manager = QuotaManager()
    manager.set_quotas(quotas)
    manager.set_capacity(capacity_of(node.allocatable for node in nodes))
    for pod in pods:
        manager.update_pod(pod)
    return manager


def manager_of(state: ClusterState) -> QuotaManager:
    """A QuotaManager fed the state's quotas, nodes (the cluster's total) and pods."""
    return _manager(state.quotas, state.nodes, state.pods)


def over_runtime(quotas: Iterable[ElasticQuota], nodes: Iterable[Node], pods: Iterable[Pod]) -> set[str]:
    """The leaf quotas whose bound pods use more than their runtime in some resource, computed
    from scratch (what reclaim may act on, once it has lasted its grace period)."""
    manager = _manager(quotas, nodes, pods)
    over = set()
    for name in manager.specs():
        if manager.is_leaf(name):
            used = manager.used(name)
            if any(used.get(r, 0) > limit for r, limit in manager.runtime(name).items()):
                over.add(name)
    return over


def reclaim_without_overuse(grace_s: float, slack_s: float) -> Callable[[ClusterState], list[Violation]]:
    """No eviction by quota reclaim unless the checks saw the pod's quota over its from-scratch
    runtime all through the grace period before it: one stretch of checks that began no later
    than `grace_s` before the eviction and lasted until it (`slack_s` for what the checks cannot
    see: the time between two of them, and the Event's whole seconds)."""

    def check(state: ClusterState) -> list[Violation]:
        violations = []
        for eviction in sorted(state.reclaimed, key=lambda e: e.pod):
            stretches = state.overuse.get(eviction.quota, ())
            began = eviction.at - grace_s + slack_s
            if any(start <= began and (end is None or end >= eviction.at - slack_s) for start, end in stretches):
                continue
            seen = ", ".join(f"{start:.0f}-{'now' if end is None else f'{end:.0f}'}" for start, end in stretches)
            violations.append(
                Violation(
                    "quota-reclaim-without-overuse",
                    (f"quota {eviction.quota}", eviction.pod),
                    f"reclaim evicted {eviction.pod} at {eviction.at:.0f}, but quota {eviction.quota} was not seen "
                    f"over its runtime (from scratch) for the {grace_s:g}s before it; seen over: {seen or 'never'}",
                )
            )
        return violations

    return check


def _over(amounts: Mapping[str, int], limit: Mapping[str, int]) -> dict[str, str]:
    return {name: f"{amounts[name]} > {cap}" for name, cap in limit.items() if amounts.get(name, 0) > cap}


def _leaf_quotas(manager: QuotaManager) -> dict[str, Mapping[str, int]]:
    """Quotas pods can use (not parents), with their max."""
    return {name: spec.max for name, spec in manager.specs().items() if not spec.is_parent}


def used_over_max(state: ClusterState) -> list[Violation]:
    if not state.quotas:
        return []
    manager = manager_of(state)
    violations = []
    for name, limit in _leaf_quotas(manager).items():
        if over := _over(manager.used(name), limit):
            pods = sorted(p.key for p in state.pods if p.node_name and manager.quota_of(p) == name)
            violations.append(
                Violation("quota-used-over-max", (f"quota {name}", *pods), f"quota {name}: bound pods use {over}")
            )
    return violations


def runtime_over_max(state: ClusterState) -> list[Violation]:
    if not state.quotas:
        return []
    manager = manager_of(state)
    return [
        Violation("quota-runtime-over-max", (f"quota {name}",), f"quota {name}: runtime {over}")
        for name, limit in _leaf_quotas(manager).items()
        if (over := _over(manager.runtime(name), limit))
    ]


def status_used(state: ClusterState) -> list[Violation]:
    if not state.quotas:
        return []
    manager = manager_of(state)
    violations = []
    for quota in state.quotas:
        if not quota.used:
            continue
        name = quota.meta.name
        computed = {k: v for k, v in manager.used(name).items() if k in quota.max}
        written = {k: v for k, v in quota.used.items() if k in quota.max}
        if computed != written:
            violations.append(
                Violation(
                    "quota-status-used",
                    (f"quota {name}",),
                    f"quota {name}: status.used {written}, but its bound pods use {computed}",
                )
            )
    return violations
