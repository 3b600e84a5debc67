"""The controller manager's Prometheus metrics, on a registry of its own (served on `/metrics`).

Names follow controller-runtime's (`reconcile_total`, `workqueue_depth`, …) under the
`tessera_controller_` prefix, with the controller's name as a label, and units in the names:

    tessera_controller_reconcile_total{controller, result}        counter; result is one of RESULTS
    tessera_controller_reconcile_duration_seconds{controller}     histogram
    tessera_controller_workqueue_depth{controller}                gauge: keys ready (not delayed)
    tessera_controller_workqueue_adds_total{controller}           counter
    tessera_controller_workqueue_retries_total{controller}        counter: keys re-added after a failure
    tessera_controller_workqueue_queue_duration_seconds{controller}  histogram: time a key waited
    tessera_controller_leader                                     gauge: 1 while this replica reconciles

plus `process_*` (resident memory, CPU seconds, open fds). Reconcilers register their own metrics
on `Metrics.registry`. No global registry: two managers in one process (tests) do not collide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

__all__ = ["RESULTS", "ControllerMetrics", "Metrics"]

#: The values of the `result` label.
RESULTS: Final = ("success", "requeue", "temporary_error", "permanent_error", "error")

_DURATION_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_WAIT_BUCKETS: Final = (0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0)


@dataclass(frozen=True, slots=True)
class ControllerMetrics:
    """One controller's labelled series; also the observer of its work queue."""

    reconciles: dict[str, Counter]
    duration: Histogram
    queue_depth: Gauge
    queue_adds: Counter
    queue_retries: Counter
    queue_wait: Histogram

    def reconciled(self, result: str, seconds: float) -> None:
        self.reconciles[result].inc()
        self.duration.observe(seconds)

    # QueueObserver
    def added(self) -> None:
        self.queue_adds.inc()

    def retried(self) -> None:
        self.queue_retries.inc()

    def depth(self, n: int) -> None:
        self.queue_depth.set(n)

    def waited(self, seconds: float) -> None:
        self.queue_wait.observe(seconds)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        ProcessCollector(registry=self.registry)
        r = self.registry
        self._reconciles = Counter(
            "tessera_controller_reconcile_total", "Reconciles, by outcome.", ["controller", "result"], registry=r
        )
        self._duration = Histogram(
            "tessera_controller_reconcile_duration_seconds",
            "Time one reconcile took.",
            ["controller"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self._depth = Gauge(
            "tessera_controller_workqueue_depth", "Keys ready in the queue.", ["controller"], registry=r
        )
        self._adds = Counter("tessera_controller_workqueue_adds_total", "Keys added.", ["controller"], registry=r)
        self._retries = Counter(
            "tessera_controller_workqueue_retries_total", "Keys re-added after a failure.", ["controller"], registry=r
        )
        self._wait = Histogram(
            "tessera_controller_workqueue_queue_duration_seconds",
            "Time a key waited in the queue before a worker took it.",
            ["controller"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.leader = Gauge("tessera_controller_leader", "1 while this replica runs its controllers.", registry=r)

    def controller(self, name: str) -> ControllerMetrics:
        """The series of controller `name` (every result label present from the start, at 0)."""
        return ControllerMetrics(
            reconciles={result: self._reconciles.labels(name, result) for result in RESULTS},
            duration=self._duration.labels(name),
            queue_depth=self._depth.labels(name),
            queue_adds=self._adds.labels(name),
            queue_retries=self._retries.labels(name),
            queue_wait=self._wait.labels(name),
        )
