"""Reservation: a pod matching a Reservation's owners is placed onto the resources it holds.

Holding needs no plugin code in the cycle: an Available Reservation is counted on its node as its
reserve pod (`scheduler.cache.reservations`), so every other pod finds those resources used. The
plugin's feed (`feed.ReservationFeed`) keeps the cache's Reservations current, as Koordinator's
plugin registers its Reservation handlers; a placed Reservation wakes its waiting owners, one
released the pods that wait for room. In the cycle, this plugin is the owners' side:

- PreFilter asks the cache which held Reservations the pod may use on each node (its owners
  match, the pod does not carry the `reservation-ignored` label), keeps those Koordinator's
  rules let it use (`matching.why_not`: affinity, taints and tolerations, `unschedulable`,
  exact-match; `matching.shortfall`: what a Restricted one has left) and nominates one per node
  (`matching.nominate`: `reservation-order`, then the tightest fit), writing them to the shared
  entry `NOMINATED_RESERVATIONS`; the runtime then filters those nodes as if that Reservation's
  remaining resources were free, and DeviceShare fits the pod within the reserved devices.
- Score puts a node with such a Reservation first: the one with the lowest `reservation-order`
  MAX_NODE_SCORE, the others between half and all of it by how tightly the pod fits what is left,
  every other node 0 (its default weight makes it outweigh every other plugin's preference).
- A pod with Koordinator's `reservation-affinity` annotation may use only the Reservations it
  selects, and nothing else: PreFilter narrows the nodes to theirs, or rejects the pod saying
  why, as Koordinator's PostFilter counts it.
- Reserve consumes the Reservation in the cache (the pod counts itself, the Reservation what it
  has left) and writes `CONSUMED_RESERVATION`, from which DeviceShare's Reserve takes the
  reserved devices; Unreserve gives it back. Both entries are declared (`writes`), so a profile
  that runs DeviceShare before this plugin is refused at startup.
- PreBind asks for the pod's `reservation-allocated` annotation, which the scheduler's
  Reservation controller turns into the Reservation's `currentOwners` and `allocated` (and
  `Succeeded` for an allocateOnce one), and which rebuilds the same state after a restart.

For a Reservation's own reserve pod with `spec.preAllocation` (`preallocation`), PreFilter
chooses per node the running pods it would be placed over and writes them to the shared entry
`PRE_ALLOCATED` (the runtime filters the node without them, DeviceShare fits within their
devices); Score puts those nodes first (fewer pods taken over, higher); Reserve claims the pods
(no other Reservation takes them meanwhile), Unreserve lets them go; PreBind records them on the
Reservation (Tessera's `pre-allocated` annotation) and writes each its `reservation-allocated`
annotation, conditional on the pod's version (a pod changed or gone since fails the binding).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from apis.crds.reservation import Reservation, pre_allocated_annotation, reservation_allocated_annotation
from apis.errors import AnnotationError
from apis.extension import names, reservationaffinity, reservationoptions
from scheduler.cache import NodeInfo, PodInfo
from scheduler.cache.reservations import HeldReservation
from scheduler.framework import config
from scheduler.framework.cycle_state import CycleState, StateData
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    Access,
    ExtensionPoint,
    Handle,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from scheduler.framework.shared import CONSUMED_RESERVATION, NOMINATED_RESERVATIONS, PRE_ALLOCATED
from scheduler.framework.status import SKIP, SUCCESS, Status
from scheduler.framework.writes import ObjectWrite, PodAnnotations, Write
from scheduler.plugins.reservation import matching, preallocation, reasons
from scheduler.plugins.reservation.feed import ReservationFeed

NAME = "Reservation"
_PREFERRED = f"{NAME}/preferred"
#: Default score weight: a node with the pod's Reservation beats any other plugin's preference.
DEFAULT_WEIGHT = 1000


@dataclass(frozen=True, slots=True)
class _Preferred(StateData):
    """Written by PreFilter: the node of the Reservation with the lowest order, if any has one,
    and each nominated Reservation's fit score."""

    node: str | None
    fits: Mapping[str, int]


class ReservationPlugin(PreFilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin, PreBindPlugin):
    name = NAME
    writes = (
        Access.of(NOMINATED_RESERVATIONS, ExtensionPoint.PRE_FILTER),
        Access.of(PRE_ALLOCATED, ExtensionPoint.PRE_FILTER),
        Access.of(CONSUMED_RESERVATION, ExtensionPoint.RESERVE),
    )

    def __init__(self, handle: Handle) -> None:
        self._cache = handle.cache
        #: Pods claimed by a Reservation being placed over them (pod ident -> Reservation UID),
        #: from Reserve until the pod's own annotation says so (or the cycle is undone).
        self._claimed: dict[str, str] = {}

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        reservation = self._cache.reservation(pod.ident)
        if reservation is not None:
            return self._pre_filter_reservation(state, reservation)
        annotations = pod.pod.annotations
        try:
            affinity = reservationaffinity.from_pod_annotations(annotations, obj=pod.key)
            exact = reservationoptions.exact_match_from_annotations(annotations, obj=pod.key)
        except AnnotationError as e:
            return None, Status.invalid_pod(str(e), plugin=NAME)
        requests = pod.requests
        misses: Counter[str] = Counter()
        owned = 0
        chosen: dict[str, HeldReservation] = {}
        for node, found in self._cache.reservations_for(pod).items():
            info = self._cache.node(node)
            labels = info.node.labels if info is not None and info.node is not None else {}
            usable = []
            for held in found:
                owned += 1
                why = matching.why_not(held, affinity=affinity, exact=exact, requests=requests, node_labels=labels)
                why = why or matching.shortfall(held, requests, required=affinity is not None)
                if why is None:
                    usable.append(held)
                else:
                    misses[why] += 1
            if usable:
                chosen[node] = matching.nominate(usable, requests)
        state.put(NOMINATED_RESERVATIONS, chosen)
        self._prefer(state, chosen, requests)
        if affinity is None:
            return None, SKIP  # no Filter: the runtime's node view does the work
        if not chosen:
            counted = [f"{n} Reservation(s) {miss}" for miss, n in sorted(misses.items())]
            return None, Status.unschedulable(
                reasons.NO_MATCHING_RESERVATION, *counted, f"{owned} Reservation(s) matched owner total", plugin=NAME
            )
        return PreFilterResult(frozenset(chosen)), SKIP

    def _pre_filter_reservation(
        self, state: CycleState, reservation: Reservation
    ) -> tuple[PreFilterResult | None, Status]:
        """A Reservation's reserve pod: with `preAllocation`, the pods it would be placed over."""
        state.delete(_PREFERRED)
        if not reservation.pre_allocation:
            return None, SKIP
        chosen = self._pre_allocatable(reservation)
        state.put(PRE_ALLOCATED, chosen)
        if not preallocation.required(reservation):
            return None, SKIP
        if not chosen:
            return None, Status.unschedulable(reasons.PRE_ALLOCATION_REQUIRED, plugin=NAME)
        return PreFilterResult(frozenset(chosen)), SKIP

    def _pre_allocatable(self, reservation: Reservation) -> dict[str, tuple[PodInfo, ...]]:
        """Per node, the running pods `reservation` would be placed over (`preallocation`)."""
        by_node: dict[str, list[PodInfo]] = {}
        for info in self._cache.pods():
            ident = info.ident
            if _uses_a_reservation(info):
                self._claimed.pop(ident, None)  # its annotation says so now: no claim needed
                continue
            if (
                not info.node_name
                or self._cache.is_assumed(ident)
                or self._cache.is_reservation(ident)
                or self._claimed_elsewhere(ident, reservation.uid)
                or not preallocation.candidate(reservation, info.pod)
            ):
                continue
            by_node.setdefault(info.node_name, []).append(info)
        chosen: dict[str, tuple[PodInfo, ...]] = {}
        for node, pods in by_node.items():
            node_info = self._cache.node(node)
            if node_info is None:
                continue
            taken = preallocation.select(reservation, node_info, preallocation.order(reservation, pods))
            if taken:
                chosen[node] = taken
        return chosen

    def _claimed_elsewhere(self, ident: str, uid: str) -> bool:
        """Whether another Reservation, still being placed or placed, claimed the pod."""
        other = self._claimed.get(ident)
        if other is None or other == uid:
            return False
        if self._cache.reservation(other) is None:
            del self._claimed[ident]  # that one is gone: the claim with it
            return False
        return True

    def _prefer(self, state: CycleState, chosen: Mapping[str, HeldReservation], requests: Mapping[str, int]) -> None:
        """Note for Score which node holds the lowest-ordered of the nominated Reservations."""
        if not chosen:
            state.delete(_PREFERRED)
            return
        ordered = [(h.reservation.order, node) for node, h in chosen.items() if h.reservation.order]
        fits = {node: matching.fit_score(h, requests) for node, h in chosen.items()}
        state.write(_PREFERRED, _Preferred(min(ordered)[1] if ordered else None, fits))

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        # With a Reservation (or pods to take over), results depend on which: no memo. Without,
        # nothing changes.
        return None if state.get(NOMINATED_RESERVATIONS) or state.get(PRE_ALLOCATED) else 0

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        return SUCCESS if state.get(NOMINATED_RESERVATIONS) or state.get(PRE_ALLOCATED) else SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        taken = (state.get(PRE_ALLOCATED) or {}).get(node.name)
        if taken:  # Koordinator's score for pre-allocation: the fewer pods taken over, the higher
            return MAX_NODE_SCORE // len(taken)
        if node.name not in (state.get(NOMINATED_RESERVATIONS) or {}):
            return 0
        preferred = state.read(_PREFERRED, _Preferred)
        if preferred is None or preferred.node == node.name:
            return MAX_NODE_SCORE
        # Above every node without a Reservation, below the ordered one: by the tightest fit.
        top = MAX_NODE_SCORE if preferred.node is None else MAX_NODE_SCORE - 1
        half = MAX_NODE_SCORE // 2
        return half + (top - half) * preferred.fits.get(node.name, 0) // matching.MAX_FIT_SCORE

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        for taken in (state.get(PRE_ALLOCATED) or {}).get(node, ()):
            self._claimed[taken.ident] = pod.ident
        held = (state.get(NOMINATED_RESERVATIONS) or {}).get(node)
        if held is not None:
            self._cache.consume_reservation(held.uid, pod.ident)
            state.put(CONSUMED_RESERVATION, held)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        for taken in (state.get(PRE_ALLOCATED) or {}).get(node, ()):
            if self._claimed.get(taken.ident) == pod.ident:
                del self._claimed[taken.ident]
        if state.get(CONSUMED_RESERVATION) is not None:
            self._cache.restore_reservation(pod.ident)
            state.drop(CONSUMED_RESERVATION)

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Sequence[Write], Status]:
        pre_allocated = (state.get(PRE_ALLOCATED) or {}).get(node)
        reservation = self._cache.reservation(pod.ident)
        if pre_allocated and reservation is not None:
            return _pre_allocation_writes(reservation, pre_allocated), SUCCESS
        taken = state.get(CONSUMED_RESERVATION)
        if taken is None or taken.node != node:
            return (), SUCCESS
        annotation = reservation_allocated_annotation(taken.reservation)
        return (PodAnnotations({names.ANNOTATION_RESERVATION_ALLOCATED: annotation}),), SUCCESS


def _uses_a_reservation(pod: PodInfo) -> bool:
    """Whether the pod carries a `reservation-allocated` annotation, even one naming a Reservation
    long gone or one that does not parse (Koordinator skips them all as pre-allocation candidates)."""
    return bool(pod.pod.meta.annotations.get(names.ANNOTATION_RESERVATION_ALLOCATED))


def _pre_allocation_writes(reservation: Reservation, pods: Sequence[PodInfo]) -> list[Write]:
    """A Reservation placed over running `pods`: its record of them, and on each pod (conditional
    on the version the choice was made from) its `reservation-allocated` annotation, removed
    again when the binding fails."""
    annotation = reservation_allocated_annotation(reservation)
    writes: list[Write] = [
        PodAnnotations({names.ANNOTATION_PRE_ALLOCATED: pre_allocated_annotation(p.pod for p in pods)})
    ]
    for taken in pods:
        meta = taken.pod.meta
        undo = ObjectWrite(
            names.CORE_PODS,
            meta.name,
            {"metadata": {"uid": meta.uid, "annotations": {names.ANNOTATION_RESERVATION_ALLOCATED: None}}},
            meta.namespace,
        )
        precondition: dict[str, object] = {"uid": meta.uid}
        if meta.resource_version:
            precondition["resourceVersion"] = meta.resource_version
        patch = {"metadata": {**precondition, "annotations": {names.ANNOTATION_RESERVATION_ALLOCATED: annotation}}}
        writes.append(ObjectWrite(names.CORE_PODS, meta.name, patch, meta.namespace, undo=undo))
    return writes


def new(args: Mapping[str, object] | None, handle: Handle) -> ReservationPlugin:
    config.expect_no_args(NAME, args)
    # The cache is the scheduler's, shared by every profile: its Reservations are fed once.
    ReservationFeed(handle.cache, handle.feeds).register(key=f"{NAME}/cache")
    return ReservationPlugin(handle)
