"""Reservation: a pod matching a Reservation's owners is placed onto the resources it holds.

Holding needs no plugin: an Available Reservation is counted on its node as its reserve pod
(`scheduler.cache.reservations`), so every other pod finds those resources used. This plugin
is the owners' side, as Koordinator's Reservation plugin:

- PreFilter asks the cache which held Reservation the pod may use on each node (its owners
  match, the pod does not carry the `reservation-ignored` label) and writes them to
  `CycleState.reservations`; the runtime then filters those nodes as if the Reservation's
  resources were free, and DeviceShare gives the reserved devices.
- Score puts a node with such a Reservation first (MAX_NODE_SCORE, the others 0; its default
  weight makes it outweigh every other plugin's preference).
- A pod with Koordinator's `reservation-affinity` annotation may use only the Reservations it
  selects, and nothing else: PreFilter narrows the nodes to theirs, or rejects the pod.
- Reserve consumes the Reservation in the cache (it stops counting, the pod counts); Unreserve
  gives it back. It runs before DeviceShare's Reserve, which takes the reserved devices.
- PreBind asks for the pod's `reservation-allocated` annotation, which the scheduler's
  Reservation controller turns into the Reservation's `currentOwners` (and `Succeeded` for an
  allocateOnce one), and which rebuilds the same state after a restart.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from apis.crds.reservation import reservation_allocated_annotation
from apis.errors import AnnotationError
from apis.extension import names, reservationaffinity
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
from scheduler.plugins.reservation import reasons

NAME = "Reservation"
#: Default score weight: a node with the pod's Reservation beats any other plugin's preference.
DEFAULT_WEIGHT = 1000


@dataclass(frozen=True, slots=True)
class _Taken(StateData):
    """Written by Reserve: the Reservation the pod consumed."""

    held: HeldReservation


class ReservationPlugin(PreFilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin, PreBindPlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self._cache = handle.cache

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        try:
            affinity = reservationaffinity.from_pod_annotations(pod.pod.annotations, obj=pod.key)
        except AnnotationError as e:
            return None, Status.invalid_pod(str(e), plugin=NAME)
        if affinity is None:
            state.reservations = self._cache.reservations_for(pod)
            return None, SKIP  # no Filter: the runtime's node view does the work
        state.reservations = self._cache.reservations_for(pod, lambda r: affinity.matches(r.name, r.meta.labels))
        if not state.reservations:
            return None, Status.unschedulable(reasons.NO_MATCHING_RESERVATION, plugin=NAME)
        return PreFilterResult(frozenset(state.reservations)), SKIP

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        # With a Reservation, results depend on which one: no memo. Without, nothing changes.
        return None if state.reservations else 0

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        return SUCCESS if state.reservations else SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return MAX_NODE_SCORE if node.name in state.reservations else 0

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
