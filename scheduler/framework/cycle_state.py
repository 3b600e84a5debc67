"""Per-pod data carried between the extension points of one scheduling cycle.

Each plugin keeps its own entry under its own key (usually its name): what PreFilter parsed,
what Reserve chose. `clone()` copies the state for a what-if evaluation (preemption tries
removing pods on a copy) without touching the original; entries decide how deep to copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from scheduler.cache.reservations import HeldReservation
from scheduler.framework.preemption import Preemption

__all__ = ["CycleState", "StateData"]

_D = TypeVar("_D", bound="StateData")


class StateData:
    """An entry in the cycle state. Immutable entries may keep the default `clone`."""

    def clone(self) -> StateData:
        return self


class CycleState:
    """Plugin entries plus the framework's per-cycle notes (which Filter/Score to skip)."""

    __slots__ = ("_data", "dry_run", "pods_to_activate", "preemption", "reservations", "skip_filter", "skip_score")

    def __init__(self, *, dry_run: bool = False) -> None:
        #: An explanation, not a cycle: plugins must leave their own bookkeeping alone (a gang's
        #: scheduling cycle counts the members PreFilter saw).
        self.dry_run = dry_run
        #: Pods (by `PodInfo.ident`) a plugin wants retried now rather than after their wait in
        #: the queue (kube's PodsToActivate: a gang's siblings once it can make progress).
        self.pods_to_activate: set[str] = set()
        self._data: dict[str, StateData] = {}
        #: Plugins whose PreFilter said SKIP: their Filter is not run this cycle.
        self.skip_filter: set[str] = set()
        #: Plugins whose PreScore said SKIP: their Score is not run this cycle.
        self.skip_score: set[str] = set()
        #: What a PostFilter decided to evict for this pod, if anything (see `preemption`).
        self.preemption: Preemption | None = None
        #: Per node, the Reservation the pod may be placed onto there (written at PreFilter by
        #: the Reservation plugin): the runtime filters that node as if the Reservation's
        #: resources were free, DeviceShare gives the reserved devices.
        self.reservations: Mapping[str, HeldReservation] = {}

    def write(self, key: str, data: StateData) -> None:
        self._data[key] = data

    def read(self, key: str, kind: type[_D]) -> _D | None:
        """The entry under `key` if it is a `kind`, else None."""
        data = self._data.get(key)
        return data if isinstance(data, kind) else None

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        copy = CycleState(dry_run=self.dry_run)
        copy._data = {k: v.clone() for k, v in self._data.items()}
        copy.skip_filter = set(self.skip_filter)
        copy.skip_score = set(self.skip_score)
        copy.reservations = self.reservations
        return copy
