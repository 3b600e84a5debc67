"""Per-pod data carried between the extension points of one scheduling cycle.

Each plugin keeps its own entry under its own key (usually its name): what PreFilter parsed,
what Reserve chose. What one plugin writes for others (or for the runtime) is a *shared* entry,
named by a `StateKey` defined below both (`scheduler.framework.shared`), read and written with
`get`/`put`; the plugins declare which they write and read (`Plugin.writes`, `Plugin.reads`) and
`Framework.build` checks that every reader runs after its writer. `clone()` copies the state for
a what-if evaluation (preemption tries removing pods on a copy) without touching the original;
entries decide how deep to copy, shared values are immutable (a writer puts a new one).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from scheduler.framework.preemption import Preemption

__all__ = ["CycleState", "StateData", "StateKey"]

_D = TypeVar("_D", bound="StateData")
_V = TypeVar("_V")


class StateKey(Generic[_V]):
    """The name of a shared cycle-state entry holding a `_V`: what one plugin writes for others.
    Compared by identity (one key object per entry); `name` is for messages."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class StateData:
    """An entry in the cycle state. Immutable entries may keep the default `clone`."""

    def clone(self) -> StateData:
        return self


class CycleState:
    """Plugin entries plus the framework's per-cycle notes (which Filter/Score to skip)."""

    __slots__ = ("_data", "_shared", "dry_run", "pods_to_activate", "preemption", "skip_filter", "skip_score")

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
        #: The shared entries: each value is its key's `_V` (`put` is the only writer).
        self._shared: dict[StateKey[Any], Any] = {}

    def write(self, key: str, data: StateData) -> None:
        self._data[key] = data

    def read(self, key: str, kind: type[_D]) -> _D | None:
        """The entry under `key` if it is a `kind`, else None."""
        data = self._data.get(key)
        return data if isinstance(data, kind) else None

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def put(self, key: StateKey[_V], value: _V) -> None:
        """Write the shared entry `key` (its writer declares it in `Plugin.writes`)."""
        self._shared[key] = value

    def get(self, key: StateKey[_V]) -> _V | None:
        """The shared entry `key`, or None when no plugin wrote it this cycle. Cheap: read per
        node in the hot path."""
        found: _V | None = self._shared.get(key)
        return found

    def drop(self, key: StateKey[_V]) -> None:
        """Remove the shared entry `key` (its writer undoing what it wrote)."""
        self._shared.pop(key, None)

    def clone(self) -> CycleState:
        copy = CycleState(dry_run=self.dry_run)
        copy._data = {k: v.clone() for k, v in self._data.items()}
        copy.skip_filter = set(self.skip_filter)
        copy.skip_score = set(self.skip_score)
        copy._shared = dict(self._shared)
        return copy
