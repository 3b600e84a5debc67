"""Run a step every N seconds until stopped: the loop boundary shared by QoS's periodic parts.

The reconciler, the BE suppression loop and network QoS each call `every`; it keeps a steady
cadence (a slow step shortens the next wait instead of drifting), and is the one place that
catches an unexpected exception from a step, logs its stack and keeps going — so a bug in one
pass never stops QoS on the node.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Clock", "every"]

log = logging.getLogger(__name__)

#: Monotonic seconds (`time.monotonic`); injectable so loop logic is testable without sleeping.
Clock = Callable[[], float]


def every(period_s: float, stop: threading.Event, step: Callable[[], object], *, clock: Clock, name: str) -> None:
    """Call `step` now and then every `period_s` seconds until `stop` is set. Blocks."""
    while not stop.is_set():
        started = clock()
        try:
            step()
        except Exception:  # loop boundary: log the bug with its stack, keep serving
            log.exception("QoS loop step failed", extra={"loop": name})
        stop.wait(max(0.0, period_s - (clock() - started)))
