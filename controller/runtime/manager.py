"""The controller manager: one process hosting several controllers over shared caches.

The manager owns what its controllers share — the API client, an `InformerFactory` (one watch
per resource, however many controllers read it), the `EventRecorder`, the metrics registry and
the HTTP endpoints — and their lifecycle:

1. serve `/healthz`, `/readyz`, `/metrics`; start the informers and wait until they have synced;
2. with leader election, campaign on a Lease and run the controllers only while leading: a
   follower keeps its caches warm so that it can take over at once, and a leader that loses its
   Lease stops its controllers (waiting for reconciles in flight) and campaigns again; without
   leader election, run them at once;
3. on `stop`, shut down in the order that keeps writes single-writer: controllers first (drain),
   then step down and release the Lease (a successor takes over at once), then informers, Events
   and the endpoints.

    manager = Manager(client, ManagerSettings(serving=ServingSettings(port=9318), leader_election=...))
    manager.add(MyReconciler(...), ControllerOptions(workers=4))  # watches wired by the caller
    manager.run(stop_event)  # blocks until stop_event is set
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Final

from controller.runtime.controller import Controller, ControllerOptions
from controller.runtime.metrics import Metrics
from controller.runtime.reconciler import Reconciler
from kube import serving
from kube.client import Client
from kube.delegation import Delegation
from kube.events import EventRecorder
from kube.informer import InformerFactory
from kube.leaderelection import LeaderElectionSettings, LeaderElector
from kube.lifecycle import wait_until_set, write_atomically
from kube.logs import V
from kube.serving import ServingSettings

__all__ = ["Manager", "ManagerSettings"]

log = logging.getLogger(__name__)

#: Where /healthz, /readyz and /metrics are served unless `--listen` says otherwise.
DEFAULT_SERVING: Final = ServingSettings(host="0.0.0.0", port=9318)


@dataclass(frozen=True, slots=True)
class ManagerSettings:
    #: The source of Events (`kubectl describe` shows it) and the User-Agent.
    component: str = "tessera-controller"
    #: Address of /healthz, /readyz and /metrics (port 0: any free port; see `Manager.port`).
    serving: ServingSettings = DEFAULT_SERVING
    #: None: no election, this replica always runs its controllers.
    leader_election: LeaderElectionSettings | None = None
    #: Informers replay every object to the handlers this often (seconds; 0: never), so a missed
    #: change is reconciled eventually even without another event.
    resync_period: float = 600.0
    #: How long stopping waits for reconciles in flight.
    drain_timeout: float = 30.0


class Manager:
    def __init__(self, client: Client, settings: ManagerSettings, *, metrics: Metrics | None = None) -> None:
        self.client = client
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.informers = InformerFactory(client, resync_period=settings.resync_period)
        self.events = EventRecorder(client, settings.component)
        self.controllers: list[Controller] = []
        self.elector: LeaderElector | None = None
        self._http = serving.Server(
            "controller HTTP",
            host=settings.serving.host,
            port=settings.serving.port,
            registry=self.metrics.registry,
            liveness={"workers": self._workers_alive},
            readiness={"informer-sync": self._synced_check, "shutdown": self._not_stopping},
            auth=Delegation(client),
            tls=settings.serving.tls.context(),
        )
        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # start/stop of the controllers (elector thread vs. shutdown)

    def add(self, reconciler: Reconciler, options: ControllerOptions | None = None) -> Controller:
        """A controller for `reconciler`, run by this manager; wire its watches on the result."""
        controller = Controller(
            reconciler, options=options or ControllerOptions(), metrics=self.metrics, events=self.events
        )
        self.controllers.append(controller)
        return controller

    @property
    def port(self) -> int:
        return self._http.port

    def run(self, stop: threading.Event) -> None:
        """Serve until `stop` is set, then shut down cleanly. Raises ConfigError if the port is taken."""
        self._http.start()
        try:
            if self.settings.serving.address_file is not None:
                write_atomically(self.settings.serving.address_file, self._http.address + "\n")
            self.informers.start()
            log.log(V(2), "Waiting for informer caches to sync")
            while not self.informers.wait_for_sync(timeout=0.5):
                if stop.is_set():
                    return
            self._synced.set()
            log.info("Informer caches synced", extra={"controllers": ",".join(c.name for c in self.controllers)})
            election = self.settings.leader_election
            if election is None:
                self._start_controllers()
            else:
                self.elector = LeaderElector(
                    self.client,
                    election,
                    on_started_leading=self._start_controllers,
                    on_stopped_leading=self._stop_controllers,
                )
                self.elector.start()
            wait_until_set(stop)
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        self._stopping.set()
        log.info("Shutting down")
        self._stop_controllers()  # before the Lease is released: no writes after a successor starts
        if self.elector is not None:
            self.elector.stop()
        self.informers.stop()
        self.events.close()
        self._http.stop()
        log.info("Stopped")

    def _start_controllers(self) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
            for controller in self.controllers:
                controller.start()
            self.metrics.leader.set(1)

    def _stop_controllers(self) -> None:
        with self._lock:
            for controller in self.controllers:
                controller.stop(self.settings.drain_timeout)
            self.metrics.leader.set(0)

    # --- checks: "" when fine, else why not ----------------------------------------------------------
    def _workers_alive(self) -> str:
        dead = [c.name for c in self.controllers if not c.workers_alive()]
        return f"a worker thread died in {', '.join(dead)}" if dead else ""

    def _synced_check(self) -> str:
        return "" if self._synced.is_set() else "the informer caches have not synced yet"

    def _not_stopping(self) -> str:
        return "shutting down" if self._stopping.is_set() else ""
