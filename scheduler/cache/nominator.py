"""Pods nominated to a node by preemption, waiting for their victims to go.

kube-scheduler's nominator, kept beside the cache: when PostFilter evicts victims to make room
for a pod, the pod is nominated to that node (`status.nominatedNodeName`) and goes back to the
queue. Until it is placed, the room its victims leave must stay its own: a pod of no higher
priority must not take it meanwhile. So when the framework filters a node for a pod, the pods
nominated there with a priority at least the pod's are counted on the node (on a copy, see
`NodeInfo.simulate`), as kube's `RunFilterPluginsWithNominatedPods` does.

A nomination ends when the pod is placed (assumed or bound), deleted, or nominated elsewhere.
Not thread-safe: the cache's owner serialises access, as for the cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from apis.crds.device import DeviceType
from apis.extension.allocation import DeviceAllocation
from scheduler.cache.podinfo import PodInfo

__all__ = ["Nominator"]


class Nominator:
    """Nominated pods by node; see the module docstring."""

    __slots__ = ("_by_node", "_node_of")

    def __init__(self) -> None:
        self._node_of: dict[str, str] = {}
        self._by_node: dict[str, dict[str, PodInfo]] = {}

    def __bool__(self) -> bool:
        """Whether any pod is nominated (the common case, none, costs the filters nothing)."""
        return bool(self._node_of)

    def nominate(self, pod: PodInfo, node: str, victims: Iterable[PodInfo] = ()) -> None:
        """`pod` waits for room on `node` (replaces an earlier nomination of the same pod).

        The devices its `victims` held there are kept for it: no filter can tell which GPU a
        pod not yet placed would get, so the room it waits for is the devices its victims free
        (a nomination without victims, read back from `status.nominatedNodeName` after a
        restart, keeps every device of the types it asks for on that node, see
        `NodeInfo.simulate`)."""
        self.forget(pod.ident)
        held: dict[DeviceType, list[DeviceAllocation]] = {}
        for victim in victims:
            for dtype, allocations in victim.allocations.items():
                held.setdefault(dtype, []).extend(allocations)
        if held:
            pod = dataclasses.replace(pod, allocations={t: tuple(a) for t, a in held.items()})
        self._node_of[pod.ident] = node
        self._by_node.setdefault(node, {})[pod.ident] = pod

    def forget(self, ident: str) -> None:
        """The pod is placed, deleted or no longer nominated. Idempotent."""
        node = self._node_of.pop(ident, None)
        if node is None:
            return
        pods = self._by_node[node]
        del pods[ident]
        if not pods:
            del self._by_node[node]

    def node_of(self, ident: str) -> str | None:
        return self._node_of.get(ident)

    def on_node(self, node: str) -> Sequence[PodInfo]:
        found = self._by_node.get(node)
        return tuple(found.values()) if found else ()

    def ahead_of(self, pod: PodInfo) -> dict[str, list[PodInfo]]:
        """Per node, the pods nominated there that `pod` must leave room for: every other
        nominated pod of at least its priority."""
        priority = pod.pod.priority
        out: dict[str, list[PodInfo]] = {}
        for node, pods in self._by_node.items():
            kept = [p for ident, p in pods.items() if ident != pod.ident and p.pod.priority >= priority]
            if kept:
                out[node] = kept
        return out
