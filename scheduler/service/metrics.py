"""The scheduler's Prometheus metrics, registered on a registry the service owns (never the global one).

    tessera_scheduler_schedule_attempts_total                     {profile, result}  scheduled, unschedulable, error
    tessera_scheduler_scheduling_attempt_duration_seconds         {profile, result}  one cycle, PreFilter → Permit
    tessera_scheduler_pod_scheduling_duration_seconds             {attempts}         first seen pending → bound
    tessera_scheduler_framework_extension_point_duration_seconds  {profile, extension_point, status}
    tessera_scheduler_pending_pods                                {queue}            active, backoff, unschedulable, …
    tessera_scheduler_queue_incoming_pods_total                   {event}            moved by a cluster event
    tessera_scheduler_bindings_total                              {result}           bound, failed
    tessera_scheduler_bind_failures_total                         {reason}           why a binding failed
    tessera_scheduler_preemption_attempts_total                                      PostFilter chose victims
    tessera_scheduler_preemption_victims_total                    {result}           evicted, gone, failed
    tessera_scheduler_migration_plans_total                       {result}           fits, planned, infeasible
    tessera_scheduler_migration_plan_duration_seconds                                one PlanMigrations search
    tessera_scheduler_cache_pods                                  {state}            bound, assumed
    tessera_scheduler_cache_nodes
    tessera_scheduler_overcommitted_devices                       {node}             over-committed by bypassing pods
    tessera_scheduler_leader                                      1 on the replica that schedules
    tessera_scheduler_reservations                                {phase}            registered by service.reservations

Names follow kube-scheduler's (`scheduler_schedule_attempts_total`, ...) with Tessera's prefix;
durations are in seconds. Gauges that mirror state (queue depth, cache size, leadership) are read
at scrape time, so the scheduling path only counts and observes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from scheduler.framework.interfaces import ExtensionPoint
from scheduler.framework.status import Code
from scheduler.service.queue import QueueName

__all__ = ["CacheSizes", "SchedulerMetrics"]

_POINT_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
_ATTEMPT_BUCKETS = (0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.0, 2.0, 5.0)
_E2E_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: kube-scheduler's extension point labels.
_POINT_LABELS: Mapping[ExtensionPoint, str] = {
    ExtensionPoint.PRE_FILTER: "PreFilter",
    ExtensionPoint.FILTER: "Filter",
    ExtensionPoint.POST_FILTER: "PostFilter",
    ExtensionPoint.PRE_SCORE: "PreScore",
    ExtensionPoint.SCORE: "Score",
    ExtensionPoint.RESERVE: "Reserve",
    ExtensionPoint.PERMIT: "Permit",
    ExtensionPoint.PRE_BIND: "PreBind",
    ExtensionPoint.BIND: "Bind",
    ExtensionPoint.POST_BIND: "PostBind",
}
_CODE_LABELS: Mapping[Code, str] = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}

#: (bound pods, assumed pods, nodes) in the cache, read at scrape time.
CacheSizes = Callable[[], tuple[int, int, int]]


class SchedulerMetrics:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        queue_lengths: Callable[[], Mapping[QueueName, int]],
        cache_sizes: CacheSizes,
        is_leader: Callable[[], bool],
        overcommitted: Callable[[], Mapping[str, int]],
    ) -> None:
        self.registry = registry
        self._attempts = Counter(
            "tessera_scheduler_schedule_attempts",
            "Scheduling attempts by result.",
            ["profile", "result"],
            registry=registry,
        )
        self._attempt_duration = Histogram(
            "tessera_scheduler_scheduling_attempt_duration_seconds",
            "Duration of one scheduling cycle (PreFilter through Permit), by result.",
            ["profile", "result"],
            buckets=_ATTEMPT_BUCKETS,
            registry=registry,
        )
        self._e2e = Histogram(
            "tessera_scheduler_pod_scheduling_duration_seconds",
            "From when the scheduler first saw a pod pending until it was bound, by attempts.",
            ["attempts"],
            buckets=_E2E_BUCKETS,
            registry=registry,
        )
        self._points = Histogram(
            "tessera_scheduler_framework_extension_point_duration_seconds",
            "Duration of each extension point for one pod (Filter and Score: over all nodes).",
            ["profile", "extension_point", "status"],
            buckets=_POINT_BUCKETS,
            registry=registry,
        )
        self._queue_moves = Counter(
            "tessera_scheduler_queue_incoming_pods",
            "Unschedulable pods moved back to be retried by a cluster event, by what happened "
            "(AssignedPodDelete, BindingUndone, ReservationPlaced, ...).",
            ["event"],
            registry=registry,
        )
        self._bindings = Counter(
            "tessera_scheduler_bindings", "Bindings by result (bound, failed).", ["result"], registry=registry
        )
        self._bind_failures = Counter(
            "tessera_scheduler_bind_failures",
            "Bindings that failed, by reason (the API error, or the plugin that refused).",
            ["reason"],
            registry=registry,
        )
        self._preemptions = Counter(
            "tessera_scheduler_preemption_attempts",
            "Preemptions decided (a pod nominated, its victims to be evicted).",
            registry=registry,
        )
        self._victims = Counter(
            "tessera_scheduler_preemption_victims",
            "Pods evicted to make room for a higher-priority pod, by result (evicted, gone, failed).",
            ["result"],
            registry=registry,
        )
        self._plans = Counter(
            "tessera_scheduler_migration_plans",
            "Defragmentation plans asked for (PlanMigrations), by result (fits, planned, infeasible).",
            ["result"],
            registry=registry,
        )
        self._plan_duration = Histogram(
            "tessera_scheduler_migration_plan_duration_seconds",
            "Duration of one defragmentation search, on a copy of the cache.",
            buckets=_E2E_BUCKETS,
            registry=registry,
        )
        registry.register(_StateCollector(queue_lengths, cache_sizes, is_leader, overcommitted))

    def observer(self, profile: str) -> Callable[[ExtensionPoint, Code, float], None]:
        """The framework's PointObserver for one profile (each point's child kept: `labels()` is
        a lock and a lookup, paid several times per pod otherwise)."""
        children = self._points
        kept: dict[tuple[ExtensionPoint, Code], Histogram] = {}

        def observe(point: ExtensionPoint, code: Code, seconds: float) -> None:
            child = kept.get((point, code))
            if child is None:
                child = kept[point, code] = children.labels(profile, _POINT_LABELS[point], _CODE_LABELS[code])
            child.observe(seconds)

        return observe

    def migration_plan(self, result: str, seconds: float) -> None:
        """A PlanMigrations answered: `fits` (nothing to move), `planned` or `infeasible`."""
        self._plans.labels(result).inc()
        self._plan_duration.observe(seconds)

    def attempt(self, profile: str, result: str, seconds: float) -> None:
        self._attempts.labels(profile, result).inc()
        self._attempt_duration.labels(profile, result).observe(seconds)

    def bound(self, *, attempts: int, e2e_seconds: float) -> None:
        self._bindings.labels("bound").inc()
        self._e2e.labels(str(attempts) if attempts < 16 else "16+").observe(e2e_seconds)

    def queue_moved(self, event: str, count: int) -> None:
        """`count` unschedulable pods moved by the event labelled `event`."""
        self._queue_moves.labels(event or "Unlabelled").inc(count)

    def bind_failed(self, reason: str) -> None:
        self._bindings.labels("failed").inc()
        self._bind_failures.labels(reason).inc()

    def preemption(self) -> None:
        self._preemptions.inc()

    def preempted(self, result: str) -> None:
        self._victims.labels(result).inc()


class _StateCollector(Collector):
    def __init__(
        self,
        queue_lengths: Callable[[], Mapping[QueueName, int]],
        cache_sizes: CacheSizes,
        is_leader: Callable[[], bool],
        overcommitted: Callable[[], Mapping[str, int]],
    ) -> None:
        self._queue_lengths = queue_lengths
        self._cache_sizes = cache_sizes
        self._is_leader = is_leader
        self._overcommitted = overcommitted

    def collect(self) -> Iterator[GaugeMetricFamily]:
        pending = GaugeMetricFamily(
            "tessera_scheduler_pending_pods", "Pending pods by queue (in-flight states included).", labels=["queue"]
        )
        for name, count in self._queue_lengths().items():
            pending.add_metric([name.value], count)
        yield pending
        bound, assumed, nodes = self._cache_sizes()
        pods = GaugeMetricFamily("tessera_scheduler_cache_pods", "Pods in the scheduler cache.", labels=["state"])
        pods.add_metric(["bound"], bound)
        pods.add_metric(["assumed"], assumed)
        yield pods
        yield GaugeMetricFamily("tessera_scheduler_cache_nodes", "Nodes in the scheduler cache.", value=nodes)
        yield GaugeMetricFamily(
            "tessera_scheduler_leader", "1 on the replica that schedules, 0 on followers.", value=int(self._is_leader())
        )
        over = GaugeMetricFamily(
            "tessera_scheduler_overcommitted_devices",
            "Devices whose holders exceed what they have (pods that bypassed the scheduler), by node; "
            "nothing more is placed on them.",
            labels=["node"],
        )
        for node, count in sorted(self._overcommitted().items()):
            over.add_metric([node], count)
        yield over
