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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from apis.crds.reservation import reservation_allocated_annotation
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
from scheduler.framework.shared import CONSUMED_RESERVATION, NOMINATED_RESERVATIONS
from scheduler.framework.status import SKIP, SUCCESS, Status
from scheduler.framework.writes import PodAnnotations, Write
from scheduler.plugins.reservation import matching, reasons
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
        Access.of(CONSUMED_RESERVATION, ExtensionPoint.RESERVE),
    )

    def __init__(self, handle: Handle) -> None:
        self._cache = handle.cache

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
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

    def _prefer(self, state: CycleState, chosen: Mapping[str, HeldReservation], requests: Mapping[str, int]) -> None:
        """Note for Score which node holds the lowest-ordered of the nominated Reservations."""
        if not chosen:
            state.delete(_PREFERRED)
            return
        ordered = [(h.reservation.order, node) for node, h in chosen.items() if h.reservation.order]
        fits = {node: matching.fit_score(h, requests) for node, h in chosen.items()}
        state.write(_PREFERRED, _Preferred(min(ordered)[1] if ordered else None, fits))

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        # With a Reservation, results depend on which one: no memo. Without, nothing changes.
        return None if state.get(NOMINATED_RESERVATIONS) else 0

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        return SUCCESS if state.get(NOMINATED_RESERVATIONS) else SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
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
        held = (state.get(NOMINATED_RESERVATIONS) or {}).get(node)
        if held is not None:
            self._cache.consume_reservation(held.uid, pod.ident)
            state.put(CONSUMED_RESERVATION, held)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if state.get(CONSUMED_RESERVATION) is not None:
            self._cache.restore_reservation(pod.ident)
            state.drop(CONSUMED_RESERVATION)

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Sequence[Write], Status]:
        taken = state.get(CONSUMED_RESERVATION)
        if taken is None or taken.node != node:
            return (), SUCCESS
        annotation = reservation_allocated_annotation(taken.reservation)
        return (PodAnnotations({names.ANNOTATION_RESERVATION_ALLOCATED: annotation}),), SUCCESS


def new(args: Mapping[str, object] | None, handle: Handle) -> ReservationPlugin:
    config.expect_no_args(NAME, args)
    # The cache is the scheduler's, shared by every profile: its Reservations are fed once.
    ReservationFeed(handle.cache, handle.feeds).register(key=f"{NAME}/cache")
    return ReservationPlugin(handle)
