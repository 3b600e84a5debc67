"""A named daemon thread that runs one step again and again until stopped.

The agent's background loops (health probes, metrics collection) share this shape: a step, a
pause, a clean stop. The step is the loop boundary the style guide allows a catch-all at: an
unexpected exception is logged with its stack and the loop goes on after a pause, so one bad
reading never kills a loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Periodic"]

log = logging.getLogger(__name__)

_PAUSE_AFTER_FAILURE_S = 1.0


class Periodic:
    """Runs `step` every `interval_s` (0: back to back, for a step that paces itself).

    The first step runs as soon as the thread starts, even when `stop` follows at once."""

    def __init__(self, name: str, step: Callable[[], None], interval_s: float) -> None:
        self.name = name
        self._step = step
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking at once on stop; True when stopping."""
        return self._stop.wait(seconds)

    def start(self) -> None:
        """Start the thread. Raises RuntimeError when already started."""
        if self._thread is not None:
            raise RuntimeError(f"loop {self.name} already started")
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the loop to stop and wait for the current step to end. Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("Loop did not stop in time", extra={"loop": self.name, "timeout_s": timeout_s})

    def _run(self) -> None:
        """Step first, then pause: a started loop always runs at least one step."""
        while True:
            try:
                self._step()
                pause = self._interval_s
            except Exception:
                log.exception("Loop step failed; continuing", extra={"loop": self.name})
                pause = max(self._interval_s, _PAUSE_AFTER_FAILURE_S)
            if self._stop.wait(pause):
                return
