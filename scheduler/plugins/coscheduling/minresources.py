"""Does a gang's `minResources` fit in what the cluster has free? scheduler-plugins' cluster-wide
pre-check (`CheckClusterResource` in its `pkg/coscheduling/core`), for its PodGroups.

As there: the PodGroup's `minResources` plus `pods: minMember` must fit in the sum, over every
node, of allocatable minus requested, where the gang's own pods already on a node (bound, or
assumed and waiting at Permit) count as free — a gang half placed is not refused by its own
members. It says nothing of which node each member fits (Filter does that), only that the
cluster as a whole can hold the gang; a gang that cannot is not started at all.

Device resources are compared in the units quotas count them in (`apis.extension.quotacount`):
`minResources: {nvidia.com/gpu: 8}` — what Kubeflow's training operator writes from its pods'
requests — is 800 `gpu-core` and 800 `gpu-memory-ratio`, which is what nodes publish for their
GPUs and what whole and shared GPU pods alike take. A node over-committed on a resource adds
nothing for it (scheduler-plugins would subtract the excess from the other nodes' room). A node
that publishes no `pods` allocatable has no pod limit, as for NodeResourcesFit.

Pure: the plugin brings the nodes and the gang's pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from apis.extension import names, quotacount
from apis.k8s.resources import ResourceList
from scheduler.cache import NodeInfo, PodInfo

__all__ = ["Shortfall", "shortfalls"]


@dataclass(frozen=True, slots=True)
class Shortfall:
    """One resource of minResources the cluster does not have free (counted units)."""

    resource: str
    needed: int
    free: int


def shortfalls(
    min_resources: ResourceList,
    min_member: int,
    nodes: Iterable[NodeInfo],
    own: Iterable[tuple[str, PodInfo]],
) -> list[Shortfall]:
    """What of `min_resources` (and `pods: min_member`) the `nodes` do not have free, sorted by
    resource; empty when the gang fits. `own` are the gang's placed pods (node name, pod), whose
    room on their nodes counts as free."""
    wanted = {name: amount for name, amount in quotacount.counted(min_resources).items() if amount > 0}
    if min_member > 0:
        wanted[names.PODS] = min_member
    if not wanted:
        return []
    own_by_node: dict[str, list[PodInfo]] = {}
    for node_name, pod in own:
        own_by_node.setdefault(node_name, []).append(pod)
    free: dict[str, int] = dict.fromkeys(wanted, 0)
    unlimited_pods = False
    for node in nodes:
        mine = own_by_node.get(node.name, ())
        allocatable = quotacount.node_counted(node.allocatable)
        requested = quotacount.counted(_without(node.requested, mine))
        for name in wanted:
            if name == names.PODS:
                limit = node.allocatable.get(names.PODS)
                if limit is None:
                    unlimited_pods = True
                else:
                    free[name] += max(0, limit - (len(node.pods) - len(mine)))
                continue
            free[name] += max(0, allocatable.get(name, 0) - requested.get(name, 0))
    return [
        Shortfall(name, amount, free[name])
        for name, amount in sorted(wanted.items())
        if free[name] < amount and not (name == names.PODS and unlimited_pods)
    ]


def _without(requested: Mapping[str, int], pods: Iterable[PodInfo]) -> Mapping[str, int]:
    """A node's requested sums less the given pods' requests."""
    pods = list(pods)
    if not pods:
        return requested
    out = dict(requested)
    for pod in pods:
        for name, amount in pod.requests.items():
            out[name] = out.get(name, 0) - amount
    return out
