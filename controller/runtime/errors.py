"""What a reconciler raises to say whether trying again can help (kopf's distinction).

    TesseraError
    └── ReconcileError
        ├── TemporaryError   the world may change: retry (after `delay`, or with the queue's backoff)
        └── PermanentError   the input is wrong: no retry until the object changes; reported as an
                             Event (`reason`, message) on the object(s) it concerns

The controller runtime turns these into queue operations in one place (`Controller`), so a
reconciler never touches its queue. `kube.APIError` raised out of a reconcile counts as temporary
(the API server may come back); anything else is a bug, logged with its stack.
"""

from __future__ import annotations

from collections.abc import Sequence

from apis.errors import TesseraError
from kube.events import ObjectReference

__all__ = ["PermanentError", "ReconcileError", "TemporaryError"]


class ReconcileError(TesseraError):
    """Root of the errors a reconciler raises on purpose."""


class TemporaryError(ReconcileError):
    """Retry this key: after `delay` seconds, or (None) after the queue's per-key backoff."""

    def __init__(self, message: str, *, delay: float | None = None) -> None:
        super().__init__(message)
        if delay is not None and delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        self.delay = delay


class PermanentError(ReconcileError):
    """Do not retry: nothing but a change of the objects can fix it.

    `reason` is the Event reason (CamelCase, a constant of the reconciler); `about` names the
    objects the Event goes on (default: the reconciler's `reference(key)`). The runtime records the
    Event once per distinct failure of a key, not on every retry of the same state.
    """

    def __init__(self, message: str, *, reason: str, about: Sequence[ObjectReference] = ()) -> None:
        super().__init__(message)
        self.reason = reason
        self.about = tuple(about)
