"""The contract between a reconciler and the controller runtime.

A reconciler makes the world match what one key (an object's `namespace/name`, or `name`) says
it should be, reading from informer caches and writing to the API server. It is level-driven:
it gets only the key, never the event, so a missed or repeated event changes nothing. The runtime
guarantees that one key is never reconciled by two workers at once, so a reconciler may keep
per-key bookkeeping without locks of its own for that key.

`reconcile(key)` returns a `Result` (done, or look again after a while) or raises
`TemporaryError` / `PermanentError` (see `controller.runtime.errors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kube.events import ObjectReference

__all__ = ["Reconciler", "Result"]


@dataclass(frozen=True, slots=True)
class Result:
    """The outcome of a reconcile that did not fail.

    `requeue_after`: look at this key again after that many seconds even if nothing changes (a
    deferred update, a timeout to check); None: done until the next change.
    """

    requeue_after: float | None = None

    def __post_init__(self) -> None:
        if self.requeue_after is not None and self.requeue_after < 0:
            raise ValueError(f"requeue_after must be >= 0, got {self.requeue_after}")


class Reconciler(Protocol):
    """What the runtime drives. `name` labels metrics, logs, threads and the Events' source."""

    @property
    def name(self) -> str: ...

    def reconcile(self, key: str) -> Result:
        """Bring `key` to its desired state. May block on API calls; must be idempotent."""
        ...

    def reference(self, key: str) -> ObjectReference | None:
        """The object Events about `key` go on (None: no object to attach them to)."""
        ...
