"""Lost nodes: nothing new is placed on them, and their pods go once their toleration runs out.

A node whose kubelet stops (the soak freezes its agent: chaos.NodeLoss) is judged lost by the node
lifecycle controller (kubecontrollers/nodelifecycle.py): tainted `unreachable` NoSchedule and
NoExecute. The soak notices the taint at its check cadence (`lost_since`, never earlier than the
taint), so both checks err on the side of no violation.

- `placed-on-lost-node`: a pod created `Bounds.health_s` or more after the soak saw the node lost
  (time for the scheduler to see the taint too) is bound to it while it is still lost.
- `lost-node-pod-not-evicted`: a pod (not finished, not being deleted) is still bound to a node
  lost for longer than the soak's pods tolerate it (`Bounds.eviction_s`) — and so still holds that
  node's devices. Judged during node losses (a loss does not restart its grace; a kill does).
"""

from __future__ import annotations

from cli.bench.soak.invariants.base import Bounds, Invariant, Violation
from cli.bench.soak.state import ClusterState, created_at

__all__ = ["invariants", "not_evicted", "placed_on_lost_node"]


def invariants(bounds: Bounds) -> list[Invariant]:
    return [
        Invariant("placed-on-lost-node", lambda state: placed_on_lost_node(state, bounds.health_s)),
        Invariant(
            "lost-node-pod-not-evicted",
            lambda state: not_evicted(state, bounds.eviction_s),
            grace_s=bounds.health_s,
            during_node_loss=True,
        ),
    ]


def placed_on_lost_node(state: ClusterState, seen_within_s: float) -> list[Violation]:
    violations = []
    for pod in state.pods:
        since = state.lost_since.get(pod.node_name)
        if since is None or pod.is_terminal or pod.is_deleting:
            continue
        created = created_at(pod, state)
        if created >= since + seen_within_s:
            violations.append(
                Violation(
                    "placed-on-lost-node",
                    (f"node/{pod.node_name}", pod.key),
                    f"{pod.key}, created {created - since:.1f} s after node {pod.node_name} was seen lost, "
                    "was placed on it",
                )
            )
    return violations


def not_evicted(state: ClusterState, toleration_s: float) -> list[Violation]:
    violations = []
    for pod in state.pods:
        since = state.lost_since.get(pod.node_name)
        if since is None or pod.is_terminal or pod.is_deleting or state.now < since + toleration_s:
            continue
        violations.append(
            Violation(
                "lost-node-pod-not-evicted",
                (f"node/{pod.node_name}", pod.key),
                f"{pod.key} is still bound to node {pod.node_name}, seen lost {state.now - since:.0f} s ago "
                f"(its pods tolerate {toleration_s:g} s)",
            )
        )
    return violations
