"""The scheduler service: the scheduling core connected to a cluster, assembled in one place.

    informers ──► cache ◄── scheduling cycle ◄── scheduling loop ──► binder ──► API server
        │                           ▲                   ▲  │            │
        │                           └─ undo ────────────┼──┼────────────┘
        └──► queue ─────────────────────────────────────┘  └──► failure reporter (condition, Event)
    inspector (reads cache, queue) ◄── gRPC API, diagnostics HTTP

The cycle (`scheduler.core.SchedulingCycle`) is the one the offline scheduler runs; here its way
to bind is the loop's `Handoff` to the asynchronous binder. One `threading.RLock` guards the
cache, the cycle and the frameworks (the core is not thread-safe): the informers' handlers, the
scheduling cycle, the binder's bookkeeping and the inspector take it; API calls never happen
under it. The informers are the scheduler's own (`ClusterFeed`: nodes, Devices, pods,
PodDisruptionBudgets) and those the plugins registered (`PluginFeeds`, from `Handle.feeds`:
ElasticQuotas, Reservations, template ConfigMaps, PodGroups — each plugin's, named nowhere here).
Reservations (`reservations/`) go through the same queue and cycle as their reserve pods, with a
second `Binder` and `FailureReporter` whose API writes the Reservation; the loop routes to them
by UID. `SchedulerService` only wires parts together and orders their start and stop;
`scheduler.service.run` adds signals and exit codes for the command line, and tests and the
benchmark use the service directly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry

from apis.errors import ConfigError
from apis.extension import names
from apis.k8s.core import Pod
from kube import Client, EventRecorder
from kube.delegation import Delegation
from kube.lifecycle import write_atomically
from scheduler.cache import ClusterCache
from scheduler.core import SchedulingCycle, build_frameworks
from scheduler.framework import Framework, PluginRef, SchedulerConfig
from scheduler.framework.feeds import Feeds
from scheduler.framework.interfaces import ClusterEvent, EnqueueExtension, ExtensionPoint
from scheduler.framework.runtime import Registry
from scheduler.plugins import DEFAULT_PLUGINS, REGISTRY
from scheduler.service import http_server
from scheduler.service.binder import Binder
from scheduler.service.feeds import PluginFeeds
from scheduler.service.gang_metrics import GangMetrics
from scheduler.service.grpc_server import GRPCServer
from scheduler.service.informers import ClusterFeed
from scheduler.service.inspector import Inspector
from scheduler.service.leader import Leadership
from scheduler.service.loop import Handoff, ReservationRoute, SchedulingLoop
from scheduler.service.metrics import SchedulerMetrics
from scheduler.service.migrations import MigrationPlanner
from scheduler.service.objectapi import KubeObjectAPI
from scheduler.service.podapi import KubePodAPI, PodAPI
from scheduler.service.preemptor import Preemptor
from scheduler.service.queue import Interest, QueuedPod, SchedulingQueue
from scheduler.service.reporter import FailureReporter
from scheduler.service.reservations import PendingReservations, ReservationAPI, ReservationController, reference
from scheduler.service.scoretable import DebugFlags
from scheduler.service.settings import SchedulerSettings
from scheduler.service.unserved import UnservedNames

__all__ = ["SchedulerService"]

log = logging.getLogger(__name__)


class SchedulerService:
    def __init__(
        self,
        settings: SchedulerSettings,
        client: Client,
        *,
        config: SchedulerConfig | None = None,
        registry: Registry = REGISTRY,
        default_plugins: tuple[PluginRef, ...] = DEFAULT_PLUGINS,
        pod_api: PodAPI | None = None,
        on_lost_leadership: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Build every part (nothing starts). Raises ConfigError for a bad profile or setting."""
        settings.validate()
        config = config if config is not None else SchedulerConfig()
        self.settings = settings
        self.lock = threading.RLock()
        self.cache = ClusterCache()
        self.registry = CollectorRegistry()
        self.debug = DebugFlags(settings.http.debug_top_n_scores)
        #: What the plugins watch and emit (`Handle.feeds`), run by `plugin_feeds` below.
        self.feeds = Feeds()
        self.metrics = SchedulerMetrics(
            self.registry,
            # Read at scrape time, when every part exists.
            queue_lengths=lambda: self.queue.lengths(),  # noqa: PLW0108
            cache_sizes=lambda: self.inspector.cache_sizes(),  # noqa: PLW0108
            is_leader=lambda: self.leadership.is_leader,
            overcommitted=lambda: self.inspector.overcommitted_devices(),  # noqa: PLW0108
        )
        self.frameworks: Mapping[str, Framework] = build_frameworks(
            config,
            self.cache,
            registry=registry,
            default_plugins=default_plugins,
            seed=settings.seed,
            observer=self.metrics.observer,
            feeds=self.feeds,
        )
        self.gang_metrics = GangMetrics(self.metrics.registry, waiting=lambda: self.inspector.gangs_waiting())  # noqa: PLW0108
        self.gang_metrics.attach(self.frameworks)
        q = settings.queue
        self.queue = SchedulingQueue(
            interest=_interest(self.frameworks),
            group_of=_queue_group(self.frameworks),
            clock=clock,
            initial_backoff=q.initial_backoff,
            max_backoff=q.max_backoff,
            max_unschedulable=q.max_unschedulable,
            moved=self.metrics.queue_moved,
        )
        self.recorder = EventRecorder(client, settings.component)
        self.unserved = UnservedNames(
            self.recorder,
            self.frameworks,
            component=settings.component,
            grace=settings.unserved_grace,
            is_leader=lambda: self.leadership.is_leader,
        )
        self.pod_api = pod_api if pod_api is not None else KubePodAPI(client)
        self.reporter = FailureReporter(
            self.pod_api,
            self.recorder,
            event_interval=settings.binder.event_interval,
            clock=clock,
            holdings=self.cache.holdings,
        )
        handoff = Handoff()
        self.cycle: SchedulingCycle[QueuedPod] = SchedulingCycle(self.cache, self.frameworks, bind=handoff, clock=clock)
        self.object_api = KubeObjectAPI(client)
        self.binder = Binder(
            self.pod_api,
            objects=self.object_api,
            lock=self.lock,
            cycle=self.cycle,
            queue=self.queue,
            reporter=self.reporter,
            recorder=self.recorder,
            metrics=self.metrics,
            workers=settings.binder.workers,
            clock=clock,
        )
        self.preemptor = Preemptor(self.pod_api, recorder=self.recorder, metrics=self.metrics)
        # Reservations are scheduled as their reserve pods; writes go to the Reservation.
        reservation_api = ReservationAPI(client)
        self.reservation_reporter = FailureReporter(
            reservation_api,
            self.recorder,
            event_interval=settings.binder.event_interval,
            clock=clock,
            refer=reference,
            holdings=self.cache.holdings,
        )
        self.reservation_binder = Binder(
            reservation_api,
            objects=self.object_api,
            lock=self.lock,
            cycle=self.cycle,
            queue=self.queue,
            reporter=self.reservation_reporter,
            recorder=self.recorder,
            metrics=self.metrics,
            workers=2,
            clock=clock,
            refer=reference,
        )
        self.pending_reservations = PendingReservations(
            self.feeds,
            queue=self.queue,
            profiles=tuple(self.frameworks),
            recorder=self.recorder,
            reporter=self.reservation_reporter,
            on_invalid=self._reservation_invalid,
            on_unserved=self.unserved.waiting,
            on_served=self.unserved.forget,
        )
        self.loop = SchedulingLoop(
            lock=self.lock,
            cycle=self.cycle,
            handoff=handoff,
            queue=self.queue,
            binder=self.binder,
            preemptor=self.preemptor,
            reporter=self.reporter,
            metrics=self.metrics,
            debug=self.debug,
            reservations=ReservationRoute(
                self.pending_reservations.owns, self.reservation_binder, self.reservation_reporter
            ),
        )
        self.feed = ClusterFeed(
            client,
            lock=self.lock,
            cache=self.cache,
            queue=self.queue,
            profiles=frozenset(self.frameworks),
            recorder=self.recorder,
            reporter=self.reporter,
            frameworks=self.frameworks,
            unserved=self.unserved,
        )
        self.plugin_feeds = PluginFeeds(
            client, self.feeds, lock=self.lock, queue=self.queue, recorder=self.recorder, pods=self.feed.pods
        )
        #: The leader's Reservation status writes (owners, expiry, invalid ones) and their
        #: metrics, when Reservations are watched (a profile has the Reservation plugin).
        watched = self.plugin_feeds.informer(names.RESERVATIONS)
        self.reservations = (
            ReservationController(
                client,
                reservations=watched,
                pods=self.feed.pods,
                recorder=self.recorder,
                is_leader=lambda: self.leadership.is_leader,
                registry=self.registry,
            )
            if watched is not None
            else None
        )
        self.leadership = Leadership(
            client,
            settings.leader_election,
            on_started=self.loop.start,
            on_lost=on_lost_leadership or self.loop.stop,
        )
        self.inspector = Inspector(
            lock=self.lock,
            cache=self.cache,
            frameworks=self.frameworks,
            queue=self.queue,
            lookup=self.feed.pod,
            fetch=self.pod_api.get,
            is_leader=lambda: self.leadership.is_leader,
        )
        self.planner = MigrationPlanner(
            lock=self.lock,
            cache=self.cache,
            config=config,
            registry=registry,
            default_plugins=default_plugins,
            lookup=self.feed.pod,
            fetch=self.pod_api.get,
            metrics=self.metrics,
            seed=settings.seed,
        )
        self.grpc = GRPCServer(settings.grpc, self.inspector, self.planner) if settings.grpc.address else None
        self.http = (
            http_server.new_server(
                settings.http.address,
                inspector=self.inspector,
                debug=self.debug,
                registry=self.registry,
                liveness={"scheduling-loop": self._liveness},
                readiness={"informer-sync": self._readiness},
                auth=Delegation(client),
                tls=settings.http.tls.context(),
            )
            if settings.http.address
            else None
        )

    def start(self) -> None:
        """Serve, sync the informers, then lead or follow. Raises ConfigError when a server
        cannot bind or the informers do not sync within `settings.sync_timeout`."""
        if self.http is not None:
            self.http.start()
            if self.settings.http.address_file is not None:
                write_atomically(self.settings.http.address_file, self.http.address + "\n")
        if self.grpc is not None:
            self.grpc.start()
        self.reporter.start()
        self.reservation_reporter.start()
        self.feed.start()
        # The plugins' (Reservations among them) before pods: an owner's annotation then finds
        # the Reservation it consumed.
        self.plugin_feeds.start()
        started = time.monotonic()
        timeout = self.settings.sync_timeout
        if not self.plugin_feeds.wait_for_sync(timeout) or not self.feed.wait_for_sync(timeout):
            raise ConfigError(f"the informers did not sync within {self.settings.sync_timeout:.0f}s")
        log.info(
            "Caches synced",
            extra={
                "nodes": len(self.feed.nodes.store),
                "pods": len(self.feed.pods.store),
                "devices": len(self.feed.devices.store),
                "seconds": f"{time.monotonic() - started:.2f}",
            },
        )
        if self.grpc is not None:
            self.grpc.set_serving(True)
        if self.reservations is not None:
            self.reservations.start()
        self.unserved.start()
        self.leadership.start()

    def stop(self) -> None:
        """Stop scheduling, let bindings in flight finish, then step down and stop everything.

        The Lease is released only after the last binding, so a successor never schedules while
        this replica still binds. Idempotent.
        """
        started = time.monotonic()
        self.queue.close()  # wakes the loop at once
        self.loop.stop()
        self.binder.stop()
        self.reservation_binder.stop()
        self.preemptor.stop()
        if self.reservations is not None:
            self.reservations.stop()
        self.unserved.stop()
        self.leadership.stop()
        self.reporter.stop()
        self.reservation_reporter.stop()
        self.feed.stop()
        self.plugin_feeds.stop()
        self.recorder.close()
        if self.grpc is not None:
            self.grpc.stop()
        if self.http is not None:
            self.http.stop()
        log.info("Stopped", extra={"seconds": f"{time.monotonic() - started:.2f}"})

    def __enter__(self) -> SchedulerService:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _liveness(self) -> str:
        return "the scheduling loop crashed" if self.loop.crashed else ""

    def _readiness(self) -> str:
        return "" if self.feed.synced and self.plugin_feeds.synced else "the informers have not synced yet"

    def _reservation_invalid(self, name: str, uid: str, message: str) -> None:
        if self.reservations is not None:
            self.reservations.invalid(name, uid, message)


def _queue_group(frameworks: Mapping[str, Framework]) -> Callable[[Pod], str | None]:
    """The set a pending pod is dequeued with (its gang group), by its profile's plugins."""

    def group_of(pod: Pod) -> str | None:
        framework = frameworks.get(pod.scheduler_name)
        return framework.queue_group(pod) if framework is not None else None

    return group_of


def _interest(frameworks: Mapping[str, Framework]) -> Interest:
    """Which cluster events concern which plugins, from their EnqueueExtension (kube's rule: a
    plugin that registers none is interested in everything)."""
    registered: dict[str, tuple[ClusterEvent, ...] | None] = {}
    for framework in frameworks.values():
        for point in ExtensionPoint:
            for name in framework.plugin_names(point):
                plugin = framework.plugin(name)
                registered[name] = plugin.events_to_register() if isinstance(plugin, EnqueueExtension) else None

    def interested(plugins: frozenset[str], event: ClusterEvent) -> bool:
        for name in plugins:
            events = registered.get(name)
            if events is None:
                return True
            if any(e.resource == event.resource and event.action & e.action for e in events):
                return True
        return False

    return interested
