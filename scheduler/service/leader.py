"""Leadership: only the replica holding the Lease schedules; the others keep warm caches.

With leader election off, this replica leads as soon as it starts (run one replica only). With
it on, a `kube.LeaderElector` campaigns for the Lease; winning starts the scheduling loop.
Losing it while running is fatal by design, as in kube-scheduler: the process must exit at once
(`on_lost`), without finishing bindings in flight — the next leader may already be scheduling
against the same devices, and a restarted process rebuilds its state from the API alone. A
clean shutdown steps down and releases the Lease, so a follower takes over immediately.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kube import Client, LeaderElectionSettings, LeaderElector

__all__ = ["Leadership"]

log = logging.getLogger(__name__)


class Leadership:
    def __init__(
        self,
        client: Client,
        settings: LeaderElectionSettings | None,
        *,
        on_started: Callable[[], None],
        on_lost: Callable[[], None],
    ) -> None:
        self._on_started = on_started
        self._on_lost = on_lost
        self._stopping = threading.Event()
        self._leading = threading.Event()
        self._elector = (
            LeaderElector(
                client,
                settings,
                on_started_leading=self._started,
                on_stopped_leading=self._stopped,
            )
            if settings is not None
            else None
        )

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    @property
    def leader(self) -> str:
        """The identity holding the Lease as last seen ("" without leader election)."""
        return self._elector.leader if self._elector is not None else ""

    def start(self) -> None:
        """Lead now (no election), or start campaigning."""
        if self._elector is None:
            self._started()
        else:
            self._elector.start()

    def stop(self) -> None:
        """Step down (releasing the Lease). Idempotent."""
        self._stopping.set()
        if self._elector is not None:
            self._elector.stop()
        self._leading.clear()

    def _started(self) -> None:
        self._leading.set()
        self._on_started()

    def _stopped(self) -> None:
        self._leading.clear()
        if not self._stopping.is_set():
            log.error("Lost leadership; the process must exit")
            self._on_lost()
