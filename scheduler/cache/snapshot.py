"""A copy of the cluster cache that is cheap to take and independent once restored.

The live scheduler answers what-if questions that mutate a cache (the defragmentation planner
moves pods in it) on a copy, and must hold its lock only while copying. `CacheSnapshot.of` takes
references to the cache's immutable parts — Node and Device objects, pods, and the devices of
pods still in flight — in one pass, with no parsing; `restore` builds a new `ClusterCache` from
them outside the lock, through the cache's own methods (bound pods are added as an informer
would add them, pods in flight assumed and their devices reserved again). A deep copy of the
same cache takes seconds at a thousand nodes; the snapshot milliseconds.

Reservations are copied as the cache knows them and restored first, so an owner in the copy can
still be placed onto its Reservation and nobody else onto what it holds; their reserve pods are
not copied as pods (the copy counts each as what it has left once its owners are restored), and
a pod in flight that consumed one consumes it in the copy too.

PodDisruptionBudgets are copied too (preemption in the copy honours them), and so are the GPU
shared-resource templates (DeviceShare in the copy places shares as the live one does) and the
holdings sources (`Holdings.copy`: the copy reads bound pods' records as the live cache does).

What is not copied: nominations (the copy is for questions about placements, not for the queue).
A bound pod whose annotation became unreadable is restored as first seen that way (its devices
unknown), which only makes the copy more cautious.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apis.crds.device import Device
from apis.crds.reservation import Reservation
from apis.k8s.core import Node, Pod
from apis.k8s.policy import PodDisruptionBudget
from scheduler.cache.cache import ClusterCache
from scheduler.cache.devices import Holding
from scheduler.cache.holdings import Holdings
from scheduler.cache.podinfo import PodInfo
from scheduler.cache.templates import SharedResourceTemplates

__all__ = ["CacheSnapshot"]


@dataclass(frozen=True, slots=True)
class _InFlight:
    """A pod assumed on a node, and the devices reserved for it there (None: none yet)."""

    info: PodInfo
    node: str
    holding: Holding | None
    #: The Reservation (UID) its cycle placed it onto, if any.
    reservation: str | None = None


@dataclass(frozen=True, slots=True)
class CacheSnapshot:
    nodes: tuple[Node, ...]
    devices: tuple[Device, ...]
    bound: tuple[Pod, ...]
    in_flight: tuple[_InFlight, ...]
    reservations: tuple[Reservation, ...] = ()
    budgets: tuple[PodDisruptionBudget, ...] = ()
    templates: SharedResourceTemplates = field(default_factory=SharedResourceTemplates)
    holdings: Holdings = field(default_factory=Holdings)

    @classmethod
    def of(cls, cache: ClusterCache) -> CacheSnapshot:
        """Take it (under the cache's lock: it reads the cache, briefly)."""
        nodes = []
        devices = []
        bound = []
        in_flight = []
        for info in cache.nodes():
            assert info.node is not None  # nodes() lists only nodes with a Node object
            nodes.append(info.node)
            if info.devices.device is not None:
                devices.append(info.devices.device)
            for ident, pod in info.pods.items():
                if cache.is_reservation(ident) and not cache.is_assumed(ident):
                    continue  # a held Reservation: restored from the Reservation, below
                if cache.is_assumed(ident):
                    consumed = cache.consumed_reservation(ident)
                    in_flight.append(_InFlight(pod, info.name, info.devices.holdings.get(ident), consumed))
                else:
                    bound.append(pod.pod)
        reservations = tuple(cache.known_reservations())
        budgets = tuple(cache.budgets.list())
        templates = SharedResourceTemplates()
        cache.templates.copy_into(templates)
        return cls(
            tuple(nodes),
            tuple(devices),
            tuple(bound),
            tuple(in_flight),
            reservations,
            budgets,
            templates,
            cache.holdings.copy(),
        )

    def restore(self) -> ClusterCache:
        """A new cache holding what the snapshot holds. Needs no lock: nothing is shared that
        can change."""
        cache = ClusterCache(holdings=self.holdings.copy())
        for node in self.nodes:
            cache.add_node(node)
        for device in self.devices:
            cache.add_device(device)
        for reservation in self.reservations:
            cache.add_reservation(reservation)
        for budget in self.budgets:
            cache.budgets.update(budget)
        self.templates.copy_into(cache.templates)
        for pod in self.bound:
            cache.add_pod(pod)
        for flight in self.in_flight:
            cache.assume(flight.info, flight.node)
            if flight.reservation is not None:
                cache.consume_reservation(flight.reservation, flight.info.ident)
            if flight.holding is not None:
                cache.reserve_devices(
                    flight.info,
                    flight.node,
                    flight.holding.allocations,
                    pcie_exclusive=flight.holding.pcie_exclusive,
                )
        return cache
