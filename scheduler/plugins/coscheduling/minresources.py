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

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from apis.extension import names, quotacount
from apis.k8s.resources import ResourceList
from scheduler.cache import NodeInfo, PodInfo

__all__ = ["ClusterFree", "Shortfall", "shortfalls"]


@dataclass(frozen=True, slots=True)
class Shortfall:
    """One resource of minResources the cluster does not have free (counted units)."""

    resource: str
    needed: int
    free: int


class ClusterFree:
    """What the whole cluster has free of each counted resource (None: no limit), without any
    gang's pods counted as free, remembered for one generation of the cache: the members of a
    gang that does not fit are checked one after another against an unchanged cache, and then
    each check costs the gang's own nodes, not every node."""

    def __init__(self) -> None:
        self._generation: int | None = None
        self._sums: dict[str, int | None] = {}

    def get(self, generation: int, wanted: Iterable[str]) -> dict[str, int | None] | None:
        """The sums of every name in `wanted`, or None when one is not remembered for `generation`."""
        if generation != self._generation or any(name not in self._sums for name in wanted):
            return None
        return {name: self._sums[name] for name in wanted}

    def put(self, generation: int, sums: Mapping[str, int | None]) -> None:
        if generation != self._generation:
            self._generation, self._sums = generation, {}
        self._sums.update(sums)


def shortfalls(
    min_resources: ResourceList,
    min_member: int,
    nodes: Sequence[NodeInfo],
    own: Iterable[tuple[str, PodInfo]],
    *,
    memo: ClusterFree | None = None,
    generation: int = 0,
) -> list[Shortfall]:
    """What of `min_resources` (and `pods: min_member`) the `nodes` do not have free, sorted by
    resource; empty when the gang fits. `own` are the gang's placed pods (node name, pod), whose
    room on their nodes counts as free. Stops at the first nodes that hold it all, as
    scheduler-plugins does, so a cluster with room answers in a few nodes; a pass to the end (the
    gang does not fit) is remembered in `memo` for the cache's `generation`."""
    wanted = {name: amount for name, amount in quotacount.counted(min_resources).items() if amount > 0}
    if min_member > 0:
        wanted[names.PODS] = min_member
    if not wanted:
        return []
    own_by_node: dict[str, list[PodInfo]] = {}
    for node_name, pod in own:
        own_by_node.setdefault(node_name, []).append(pod)
    remembered = memo.get(generation, wanted) if memo is not None else None
    if remembered is not None:
        # Those sums count the gang's pods as using their room: give it back on their nodes.
        by_name = {node.name: node for node in nodes if node.name in own_by_node}
        now = dict(remembered)
        for name, total in remembered.items():
            if total is not None:
                held = sum(
                    (_room(node, mine, name) or 0) - (_room(node, (), name) or 0)
                    for node_name, mine in own_by_node.items()
                    if (node := by_name.get(node_name)) is not None
                )
                now[name] = total + held
        return _short(wanted, now)
    free: dict[str, int | None] = dict.fromkeys(wanted, 0)
    alone: dict[str, int | None] = dict.fromkeys(wanted, 0)  # the same sums without the gang's pods
    for node in nodes:
        mine = own_by_node.get(node.name, ())
        for name in wanted:
            room = _room(node, mine, name)
            without = _room(node, (), name) if mine else room
            free[name] = _plus(free[name], room)
            alone[name] = _plus(alone[name], without)
        if all((room := free[name]) is None or room >= amount for name, amount in wanted.items()):
            return []
    if memo is not None:
        memo.put(generation, alone)
    return _short(wanted, free)


def _plus(total: int | None, room: int | None) -> int | None:
    """A sum of free amounts, where None (no limit) stays None."""
    return None if total is None or room is None else total + room


def _short(wanted: Mapping[str, int], free: Mapping[str, int | None]) -> list[Shortfall]:
    """The names whose free amount (None: no limit) is below what is wanted."""
    return [
        Shortfall(name, amount, room)
        for name, amount in sorted(wanted.items())
        if (room := free[name]) is not None and room < amount
    ]


def _room(node: NodeInfo, mine: Sequence[PodInfo], name: str) -> int | None:
    """`name` (a counted name, or `pods`) free on the node, the gang's own pods `mine` there counted
    as free; None for pods on a node that publishes no pod limit."""
    if name == names.PODS:
        limit = node.allocatable.get(names.PODS)
        return None if limit is None else max(0, limit - (len(node.pods) - len(mine)))
    allocatable, requested = node.allocatable, node.requested
    total, used = 0, 0
    for spelling, factor in _spellings(name):
        total = max(total, allocatable.get(spelling, 0) * factor)
        used += requested.get(spelling, 0) * factor
        for pod in mine:
            used -= pod.requests.get(spelling, 0) * factor
    return max(0, total - used)


@functools.cache
def _spellings(name: str) -> tuple[tuple[str, int], ...]:
    """Every resource name that counts into the counted `name`, with its factor (`name` itself
    when it counts as itself)."""
    found = [
        (spelling, factor) for spelling, counts in quotacount.COUNTS.items() for into, factor in counts if into == name
    ]
    if name not in quotacount.COUNTS and not any(spelling == name for spelling, _ in found):
        found.append((name, 1))
    return tuple(found)
