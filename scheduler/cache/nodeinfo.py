"""What the scheduler knows about one node: the Node, the pods on it, their sums, its devices.

Filter and Score plugins read a NodeInfo; only ClusterCache writes one. Sums are kept
incrementally (adding or removing a pod touches only its own requests), so a Filter reads
`requested` instead of summing pods. `generation` changes on every write and
`device_generation` on every device write, both drawn from one cache-wide counter, so a plugin
may memoise per-node results keyed by them and never see a stale entry, even for a node that
was removed and re-added.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from apis.extension import names
from apis.k8s.core import Node
from scheduler.cache.devices import Holding, NodeDevices
from scheduler.cache.podinfo import PodInfo

__all__ = ["DEFAULT_MEMORY_REQUEST", "DEFAULT_MILLI_CPU_REQUEST", "NodeInfo", "non_zero_requests"]

#: kube-scheduler scores a pod without CPU/memory requests as if it asked for these.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_EMPTY: Mapping[str, int] = {}
#: Generations of copies (`NodeInfo.simulate`): negative, so no memo keyed by generation ever
#: takes a copy for the node itself, nor one copy for another.
_copy_generations = itertools.count(-1, -1)


def non_zero_requests(requests: Mapping[str, int]) -> tuple[int, int]:
    """(milli-CPU, memory bytes) for scoring, with kube-scheduler's defaults for zero requests."""
    return (
        requests.get(names.CPU, 0) or DEFAULT_MILLI_CPU_REQUEST,
        requests.get(names.MEMORY, 0) or DEFAULT_MEMORY_REQUEST,
    )


class NodeInfo:
    """One node's state. `node` is None while only pods or a Device CR have been seen for it."""

    __slots__ = (
        "device_generation",
        "devices",
        "generation",
        "name",
        "node",
        "non_zero_requested",
        "pods",
        "requested",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.node: Node | None = None
        #: pod ident -> PodInfo, for bound and assumed pods
        self.pods: dict[str, PodInfo] = {}
        #: Sum of the pods' effective requests (every resource name, devices included).
        self.requested: dict[str, int] = {}
        #: (milli-CPU, memory) summed with kube-scheduler's non-zero defaults, for scoring.
        self.non_zero_requested: list[int] = [0, 0]
        self.devices = NodeDevices()
        self.generation = 0
        self.device_generation = 0

    @property
    def allocatable(self) -> Mapping[str, int]:
        return self.node.allocatable if self.node is not None else _EMPTY

    def free(self, name: str) -> int:
        """Allocatable minus requested for one resource (may be negative when over-committed)."""
        return self.allocatable.get(name, 0) - self.requested.get(name, 0)

    def is_empty(self) -> bool:
        """No Node, no pods and no Device CR: the cache may drop it."""
        return self.node is None and not self.pods and self.devices.device is None

    def add_pod(self, pod: PodInfo) -> None:
        self.pods[pod.ident] = pod
        requested = self.requested
        for name, amount in pod.requests.items():
            if amount:  # zero requests leave no key behind: sums compare equal after undo
                requested[name] = requested.get(name, 0) + amount
        cpu, memory = non_zero_requests(pod.requests)
        self.non_zero_requested[0] += cpu
        self.non_zero_requested[1] += memory

    def remove_pod(self, ident: str) -> PodInfo | None:
        pod = self.pods.pop(ident, None)
        if pod is None:
            return None
        requested = self.requested
        for name, amount in pod.requests.items():
            if not amount:
                continue
            left = requested.get(name, 0) - amount
            if left:
                requested[name] = left
            else:
                requested.pop(name, None)
        cpu, memory = non_zero_requests(pod.requests)
        self.non_zero_requested[0] -= cpu
        self.non_zero_requested[1] -= memory
        return pod

    def simulate(self, *, remove: Iterable[str] = (), add: Iterable[PodInfo] = ()) -> NodeInfo:
        """A copy of this node without the pods `remove` (by ident) and with the pods `add`
        (counted in its sums, and in its devices as far as their `allocations` say: a nominated
        pod holds the devices its victims free; one that asks for devices without allocations
        holds devices of those types that are unknown, which keeps them all from other pods, as
        for a bound pod whose annotation is unreadable). For preemption and nominated pods: the
        Filters run on the copy, the cache is never touched. The copy has a generation of its
        own, so per-node memos never confuse it with the node."""
        gone = frozenset(remove)
        added = list(add)
        copy = NodeInfo(self.name)
        copy.node = self.node
        copy.pods = dict(self.pods)  # the sums copied, then the gone pods taken out: no re-summing
        copy.requested = dict(self.requested)
        copy.non_zero_requested = list(self.non_zero_requested)
        for ident in gone:
            copy.remove_pod(ident)
        holding = [p for p in added if p.allocations or p.device_requests]
        devices = self.devices
        freed = any(i in devices.holdings or devices.is_unknown(i) for i in gone)
        copy.devices = devices.copy_without(gone) if freed or holding else devices
        for pod in added:
            copy.add_pod(pod)
        for pod in holding:
            if pod.allocations:
                copy.devices.hold(Holding(pod.key, pod.ident, pod.allocations, pod.pcie_exclusive))
            else:
                copy.devices.mark_unknown(pod.ident, pod.key, frozenset(pod.device_requests))
        copy.generation = copy.device_generation = next(_copy_generations)
        return copy
