"""Garbage collection for processes whose heap grows: full collections that scan what is new.

CPython's full collection (generation 2) walks every container object the process holds, and it
runs each time the heap has grown by a quarter since the last one. A component taking in
thousands of objects — the API server storing pods and their watch events, the scheduler caching
them — therefore stopped every thread for 150–230 ms every few seconds while it grew: measured
with `tessera bench scheduler-e2e` at 500 pods/s, those pauses, in the API server, the scheduler
and the benchmark's own client, made the p99.

`install()` freezes (`gc.freeze`: moved where no collection looks) what the process built at
start, then, after each full collection, what survived it; so the next full collection scans
only what arrived since, and its pause follows the growth, not the heap. Objects that are frozen
and later become unreachable are still freed by reference counting; only a reference cycle among
them waits: every `thaw_interval` the frozen objects are handed back, and the next full
collection looks at everything once and frees such cycles.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any, Final

__all__ = ["THAW_INTERVAL", "install", "uninstall"]

#: How long frozen objects stay out of full collections before one looks at everything again.
THAW_INTERVAL: Final = 600.0

_installed: list[Callable[[str, dict[str, Any]], None]] = []


def install(*, thaw_interval: float = THAW_INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
    """Freeze what exists now and what survives each full collection from now on. Idempotent."""
    if _installed:
        return
    thawed_at = clock()

    def after_collection(phase: str, info: dict[str, Any]) -> None:
        nonlocal thawed_at
        if phase != "stop" or info.get("generation") != 2:
            return
        # The collection is over: moving its survivors (or giving them back) is safe here.
        now = clock()
        if now - thawed_at >= thaw_interval:
            gc.unfreeze()  # the next full collection sees everything, and frees stale cycles
            thawed_at = now
        else:
            gc.freeze()

    gc.freeze()
    gc.callbacks.append(after_collection)
    _installed.append(after_collection)


def uninstall() -> None:
    """Stop freezing and give the frozen objects back to the collector (tests)."""
    while _installed:
        gc.callbacks.remove(_installed.pop())
    gc.unfreeze()
