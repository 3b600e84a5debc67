"""Reservation: a pod matching a Reservation's owners is placed onto the resources it holds.

Holding needs no plugin: an Available Reservation is counted on its node as its reserve pod
(`scheduler.cache.reservations`), so every other pod finds those resources used. This plugin
is the owners' side, as Koordinator's Reservation plugin:

- PreFilter asks the cache which held Reservations the pod may use on each node (its owners
  match, the pod does not carry the `reservation-ignored` label), keeps those Koordinator's
  rules let it use (`matching.why_not`: affinity, taints and tolerations, `unschedulable`,
  exact-match; `matching.shortfall`: what a Restricted one has left) and nominates one per node
  (`matching.nominate`: `reservation-order`, then the tightest fit), writing them to
  `CycleState.reservations`; the runtime then filters those nodes as if that Reservation's
  remaining resources were free, and DeviceShare gives the reserved devices.
- Score puts a node with such a Reservation first: the one with the lowest `reservation-order`
  MAX_NODE_SCORE, the others between half and all of it by how tightly the pod fits what is left,
  every other node 0 (its default weight makes it outweigh every other plugin's preference).
- A pod with Koordinator's `reservation-affinity` annotation may use only the Reservations it
  selects, and nothing else: PreFilter narrows the nodes to theirs, or rejects the pod saying
  why, as Koordinator's PostFilter counts it.
- Reserve consumes the Reservation in the cache (the pod counts itself, the Reservation what it
  has left); Unreserve gives it back. It runs before DeviceShare's Reserve, which takes the
  reserved devices.
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
    Handle,
    PodPatch,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from scheduler.framework.status import SKIP, SUCCESS, Status
from scheduler.plugins.reservation import matching, reasons

NAME = "Reservation"
_PREFERRED = f"{NAME}/preferred"
#: Default score weight: a node with the pod's Reservation beats any other plugin's preference.
DEFAULT_WEIGHT = 1000


@dataclass(frozen=True, slots=True)
class _Taken(StateData):
    """Written by Reserve: the Reservation the pod consumed."""

    held: HeldReservation


@dataclass(frozen=True, slots=True)
class _Preferred(StateData):
    """Written by PreFilter: the node of the Reservation with the lowest order, if any has one,
    and each nominated Reservation's fit score."""

    node: str | None
    fits: Mapping[str, int]


class ReservationPlugin(PreFilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin, PreBindPlugin):
    name = NAME

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
        state.reservations = chosen
        self._prefer(state, requests)
        if affinity is None:
            return None, SKIP  # no Filter: the runtime's node view does the work
        if not chosen:
            counted = [f"{n} Reservation(s) {miss}" for miss, n in sorted(misses.items())]
            return None, Status.unschedulable(
                reasons.NO_MATCHING_RESERVATION, *counted, f"{owned} Reservation(s) matched owner total", plugin=NAME
            )
        return PreFilterResult(frozenset(chosen)), SKIP

    def _prefer(self, state: CycleState, requests: Mapping[str, int]) -> None:
        """Note for Score which node holds the lowest-ordered of the nominated Reservations."""
        if not state.reservations:
            state.delete(_PREFERRED)
            return
        ordered = [(h.reservation.order, node) for node, h in state.reservations.items() if h.reservation.order]
        fits = {node: matching.fit_score(h, requests) for node, h in state.reservations.items()}
        state.write(_PREFERRED, _Preferred(min(ordered)[1] if ordered else None, fits))

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        # With a Reservation, results depend on which one: no memo. Without, nothing changes.
        return None if state.reservations else 0

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        return SUCCESS if state.reservations else SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        if node.name not in state.reservations:
            return 0
        preferred = state.read(_PREFERRED, _Preferred)
        if preferred is None or preferred.node == node.name:
            return MAX_NODE_SCORE
        # Above every node without a Reservation, below the ordered one: by the tightest fit.
        top = MAX_NODE_SCORE if preferred.node is None else MAX_NODE_SCORE - 1
        half = MAX_NODE_SCORE // 2
        return half + (top - half) * preferred.fits.get(node.name, 0) // matching.MAX_FIT_SCORE

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        held = state.reservations.get(node)
        if held is not None:
            self._cache.consume_reservation(held.uid, pod.ident)
            state.write(NAME, _Taken(held))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if state.read(NAME, _Taken) is not None:
            self._cache.restore_reservation(pod.ident)
            state.delete(NAME)

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str, patch: PodPatch) -> Status:
        taken = state.read(NAME, _Taken)
        if taken is not None and taken.held.node == node:
            patch.annotations[names.ANNOTATION_RESERVATION_ALLOCATED] = reservation_allocated_annotation(
                taken.held.reservation
            )
        return SUCCESS


def new(args: Mapping[str, object] | None, handle: Handle) -> ReservationPlugin:
    config.expect_no_args(NAME, args)
    return ReservationPlugin(handle)
