"""Gang scheduling's Prometheus metrics, beside the scheduler's own (`metrics.py`):

    tessera_scheduler_gangs_waiting                               gang groups with members waiting at Permit
    tessera_scheduler_gang_groups_allowed_total                   gang groups allowed at once
    tessera_scheduler_gang_groups_rejected_total   {cause}        timeout, failure (a member failed)
    tessera_scheduler_gang_wait_duration_seconds                  first member waiting → group allowed

The Coscheduling plugins report to it (`attach`); the waiting gauge is read at scrape time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from scheduler.framework import Framework
from scheduler.plugins.coscheduling import Coscheduling

__all__ = ["GangMetrics"]

_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)


class GangMetrics:
    """A `GangObserver` over Prometheus series."""

    def __init__(self, registry: CollectorRegistry, *, waiting: Callable[[], int]) -> None:
        self._allowed = Counter(
            "tessera_scheduler_gang_groups_allowed", "Gang groups allowed at Permit, all at once.", registry=registry
        )
        self._rejected = Counter(
            "tessera_scheduler_gang_groups_rejected",
            "Gang groups whose waiting members were rejected, by cause (timeout, failure).",
            ["cause"],
            registry=registry,
        )
        self._wait = Histogram(
            "tessera_scheduler_gang_wait_duration_seconds",
            "From a gang group's first member waiting at Permit until the group was allowed.",
            buckets=_WAIT_BUCKETS,
            registry=registry,
        )
        registry.register(_WaitingCollector(waiting))

    def attach(self, frameworks: Mapping[str, Framework]) -> None:
        """Make every profile's Coscheduling report here."""
        for framework in frameworks.values():
            plugin = framework.plugin(Coscheduling.name)
            if isinstance(plugin, Coscheduling):
                plugin.observer = self

    def allowed(self, group: str, seconds: float) -> None:
        self._allowed.inc()
        self._wait.observe(seconds)

    def rejected(self, group: str, cause: str) -> None:
        self._rejected.labels(cause).inc()


class _WaitingCollector(Collector):
    def __init__(self, waiting: Callable[[], int]) -> None:
        self._waiting = waiting

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "tessera_scheduler_gangs_waiting", "Gangs with members waiting at Permit.", value=self._waiting()
        )
