"""Checking the invariants now and then while the soak runs, from a thread of its own.

Each check reads the API server's objects (`observe.read_state`), runs every invariant and hands
the findings to `Persistence`, which decides what counts. A check the API server does not answer
(it was just killed) is skipped and counted as such. Every violation that counts is logged at
once with the objects involved, so a long run shows trouble as it happens.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from apis.errors import TesseraError
from cli.bench.soak.invariants import Invariant, Persistence, Violation, check
from cli.bench.soak.observe import Record, read_state
from kube.client import Client

__all__ = ["Checker"]

log = logging.getLogger(__name__)


class Checker:
    def __init__(
        self,
        client: Client,
        record: Record,
        invariants: list[Invariant],
        *,
        calm_since: Callable[[], float],
        kills_calm_since: Callable[[], float] | None = None,
        on_violation: Callable[[Violation], None] = lambda _: None,
    ) -> None:
        self._client = client
        self._record = record
        self._invariants = invariants
        self._calm_since = calm_since
        self._kills_calm_since = kills_calm_since
        self._on_violation = on_violation
        self.persistence = Persistence(invariants)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.checks = 0
        self.skipped = 0

    def check_once(self) -> bool:
        """One check; False when the API server did not answer (skipped)."""
        with self._lock:
            try:
                state = read_state(self._client, self._record)
            except (TesseraError, OSError) as e:
                self.skipped += 1
                log.info("Skipping a check: the API server does not answer", extra={"error": str(e)})
                return False
            found = check(self._invariants, state)
            self.checks += 1
            kills_calm = self._kills_calm_since() if self._kills_calm_since is not None else None
            new = self.persistence.update(
                found, now=state.now, calm_since=self._calm_since(), kills_calm_since=kills_calm
            )
            for violation in new:
                log.error(
                    "Invariant violated",
                    extra={
                        "invariant": violation.invariant,
                        "objects": list(violation.objects),
                        "violation": violation.message,
                    },
                )
                self._on_violation(violation)
            return True

    def run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self.check_once()

    def stop(self) -> None:
        self._stop.set()

    def settle(self, timeout_s: float, interval_s: float) -> None:
        """Check until nothing is wrong any more (no candidate either) or `timeout_s` has passed,
        when every candidate's grace has run out and what is still wrong counts."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.check_once() and self.persistence.candidates == 0:
                return
            time.sleep(interval_s)
        self.check_once()

    @property
    def violations(self) -> list[Violation]:
        return sorted(self.persistence.counted.values())
