"""`descheduler.run(settings)`: the `tessera descheduler` process, from settings to clean exit.

1. serve `/healthz`, `/readyz` (caches synced, loop alive) and `/metrics`; start informers for
   PodMigrationJobs, Reservations, pods and what the safety rules read (ReplicaSets,
   Deployments, StatefulSets, PodDisruptionBudgets) and wait until they have synced;
2. with leader election, work only while holding the Lease (a follower keeps its caches warm);
3. work is one loop thread: each pass runs the strategies that are due (they create jobs) and
   then every unfinished job one step further (`migration.Executor`). A pass runs every
   `--resync` seconds and at once when a watched object changes. One thread means the safety
   counts (caps, the rate limit) see every decision of the pass before the next one;
4. on SIGTERM/SIGINT: finish the pass, step down, stop informers, Events and the endpoints.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from apis.extension import names
from descheduler.arbitration import Arbiter
from descheduler.cluster import BY_NAMESPACE, Cluster
from descheduler.metrics import Metrics
from descheduler.migration import Executor
from descheduler.settings import DeschedulerSettings
from kube import serving
from kube.client import Client
from kube.delegation import Delegation
from kube.events import EventRecorder
from kube.informer import Informer, InformerFactory, raw
from kube.leaderelection import LeaderElector
from kube.lifecycle import stop_on_signals, wait_until_set, write_atomically
from kube.resources import DEPLOYMENTS, POD_DISRUPTION_BUDGETS, PODS, REPLICA_SETS, STATEFUL_SETS

__all__ = ["Descheduler", "Strategy", "run"]

log = logging.getLogger(__name__)


class Strategy(Protocol):
    """Something that creates PodMigrationJobs now and then (`strategies.defrag`)."""

    name: str

    def due(self, now: float) -> bool: ...

    def run(self, cluster: Cluster) -> None: ...


class Descheduler:
    def __init__(
        self,
        client: Client,
        settings: DeschedulerSettings,
        *,
        strategies: list[Strategy] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.settings = settings
        self.metrics = Metrics()
        self.events = EventRecorder(client, "tessera-descheduler")
        if strategies is None:
            from descheduler.strategies import from_settings

            strategies = from_settings(client, settings, metrics=self.metrics, events=self.events)
        self.strategies = strategies
        self._clock = clock
        factory = InformerFactory(client)
        self._factory = factory
        informers: dict[str, Informer[Any]] = {
            "pods": factory.informer(PODS, parse=raw, indexers=BY_NAMESPACE),
            "replica_sets": factory.informer(REPLICA_SETS, parse=raw, indexers=BY_NAMESPACE),
            "deployments": factory.informer(DEPLOYMENTS, parse=raw, indexers=BY_NAMESPACE),
            "stateful_sets": factory.informer(STATEFUL_SETS, parse=raw, indexers=BY_NAMESPACE),
            "pdbs": factory.informer(POD_DISRUPTION_BUDGETS, parse=raw, indexers=BY_NAMESPACE),
            "reservations": factory.informer(names.RESERVATIONS, parse=raw),
            "jobs": factory.informer(names.POD_MIGRATION_JOBS, parse=raw),
        }
        self.cluster = Cluster(**{k: i.store for k, i in informers.items()})
        for informer in informers.values():
            informer.add_handlers(on_add=self._poke, on_update=self._poke2, on_delete=self._poke)
        self.executor = Executor(
            client,
            self.cluster,
            Arbiter(settings.arbitration, clock=clock),
            settings=settings.migration,
            metrics=self.metrics,
            events=self.events,
            dry_run=settings.arbitration.dry_run,
        )
        self._http = serving.Server(
            "descheduler HTTP",
            host=settings.serving.host,
            port=settings.serving.port,
            registry=self.metrics.registry,
            liveness={"loop": self._loop_alive},
            readiness={"informer-sync": self._synced_check},
            auth=Delegation(client),
            tls=settings.serving.tls.context(),
        )
        self._wake = threading.Event()
        self._leading = threading.Event()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._loop: threading.Thread | None = None
        self.elector: LeaderElector | None = None

    @property
    def port(self) -> int:
        return self._http.port

    def _poke(self, _obj: object) -> None:
        self._wake.set()

    def _poke2(self, _old: object, _new: object) -> None:
        self._wake.set()

    # --- lifecycle ---------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Serve until `stop` is set, then shut down cleanly. Raises ConfigError if the port is taken."""
        self._http.start()
        try:
            if self.settings.serving.address_file is not None:
                write_atomically(self.settings.serving.address_file, self._http.address + "\n")
            self._factory.start()
            while not self._factory.wait_for_sync(timeout=0.5):
                if stop.is_set():
                    return
            self._synced.set()
            log.info("Informer caches synced")
            election = self.settings.leader_election
            if election is None:
                self._started_leading()
            else:
                self.elector = LeaderElector(
                    self.client,
                    election,
                    on_started_leading=self._started_leading,
                    on_stopped_leading=self._stopped_leading,
                )
                self.elector.start()
            self._loop = threading.Thread(target=self._work, args=(stop,), name="descheduler-loop", daemon=True)
            self._loop.start()
            wait_until_set(stop)
        finally:
            self._stop.set()
            self._wake.set()
            if self._loop is not None:
                self._loop.join(30)
            if self.elector is not None:
                self.elector.stop()
            self._factory.stop()
            self.events.close()
            self._http.stop()
            log.info("Stopped")

    def _started_leading(self) -> None:
        self._leading.set()
        self.metrics.leader.set(1)
        self._wake.set()

    def _stopped_leading(self) -> None:
        self._leading.clear()
        self.metrics.leader.set(0)

    def _work(self, stop: threading.Event) -> None:
        while not stop.is_set() and not self._stop.is_set():
            self._wake.wait(self.settings.migration.resync)
            self._wake.clear()
            if not self._leading.is_set() or self._stop.is_set():
                continue
            self.sync_once()

    def sync_once(self) -> None:
        """One pass: due strategies, then every unfinished job. The loop boundary: a bug in one
        pass is logged with its stack and the next pass runs."""
        started = self._clock()
        try:
            for strategy in self.strategies:
                if strategy.due(started):
                    strategy.run(self.cluster)
                    self.metrics.strategy_runs.labels(strategy.name).inc()
            self.executor.sync()
        except Exception:
            log.exception("Descheduler pass failed")
        finally:
            self.metrics.sync_duration.observe(self._clock() - started)

    # --- checks: "" when fine, else why not ----------------------------------------------------------
    def _loop_alive(self) -> str:
        return "the work loop died" if self._loop is not None and not self._loop.is_alive() else ""

    def _synced_check(self) -> str:
        return "" if self._synced.is_set() else "the informer caches have not synced yet"


def run(
    settings: DeschedulerSettings,
    *,
    stop: threading.Event | None = None,
    strategies: list[Strategy] | None = None,
) -> int:
    """Run until `stop` is set (None: until SIGTERM/SIGINT, in the main thread). Returns 0.

    `strategies` None: those the settings turn on (`descheduler.strategies.from_settings`)."""
    settings.validate()
    with Client.from_settings(settings.client) as client:
        descheduler = Descheduler(client, settings, strategies=strategies)
        election = settings.leader_election
        a = settings.arbitration
        log.info(
            "Starting the descheduler",
            extra={
                "server": client.host,
                "dryRun": a.dry_run,
                "strategies": ",".join(s.name for s in descheduler.strategies) or "none",
                "leaderElection": f"{election.namespace}/{election.lease_name}" if election else "off",
            },
        )
        if stop is not None:
            descheduler.run(stop)
        else:
            with stop_on_signals() as signalled:
                descheduler.run(signalled)
    return 0
