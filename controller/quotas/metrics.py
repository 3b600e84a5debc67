"""Metrics of the quota controller (registered on the manager's registry).

Amounts are in each resource's base unit, as the quota's quantities parse (`koordinator.sh/gpu-core`
in percent of a GPU, memory in bytes, cpu in millicores), so the unit is the `resource` label's.

| metric | type | labels |
| --- | --- | --- |
| `tessera_controller_quota_runtime` | gauge | quota, namespace, resource |
| `tessera_controller_quota_used` | gauge | quota, namespace, resource |
| `tessera_controller_quota_request` | gauge | quota, namespace, resource |
| `tessera_controller_quota_min` | gauge | quota, namespace, resource |
| `tessera_controller_quota_max` | gauge | quota, namespace, resource |
| `tessera_controller_quota_reclaim_evictions_total` | counter | quota, namespace |
| `tessera_controller_quota_root_total` | gauge | resource: the root's total (nodes less pods outside the tree) |
| `tessera_controller_quota_excess` | gauge | resource: leaf quotas' use above their runtimes (what reclaim takes) |
| `tessera_controller_quota_reclaim_paused` | gauge | (1 while reclaim's circuit breaker holds evictions back) |
| `tessera_controller_quota_reclaim_pauses_total` | counter | reason: `RootTotalCollapsed`, `MassOveruse`, `Restored` |
| `tessera_controller_quota_writes_total` | counter | part: `status`, `annotations` |
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["QuotaMetrics"]

_LABELS = ("quota", "namespace", "resource")
_FIGURES = ("runtime", "used", "request", "min", "max")


class QuotaMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._gauges = {
            figure: Gauge(
                f"tessera_controller_quota_{figure}",
                f"The quota's {figure} per resource, in the resource's base unit.",
                _LABELS,
                registry=registry,
            )
            for figure in _FIGURES
        }
        self.evictions = Counter(
            "tessera_controller_quota_reclaim_evictions_total",
            "Pods evicted because their quota used more than its runtime past the grace period.",
            ("quota", "namespace"),
            registry=registry,
        )
        self._tree = {
            figure: Gauge(f"tessera_controller_quota_{figure}", text, ["resource"], registry=registry)
            for figure, text in (
                ("root_total", "The root quota's total per resource: the nodes' less what pods outside the tree hold."),
                ("excess", "What leaf quotas use above their runtimes, summed: what reclaim would take back now."),
            )
        }
        self._tree_shown: dict[str, set[str]] = {}
        self.paused = Gauge(
            "tessera_controller_quota_reclaim_paused",
            "1 while quota reclaim's circuit breaker holds evictions back, else 0.",
            registry=registry,
        )
        self.pauses = Counter(
            "tessera_controller_quota_reclaim_pauses_total",
            "Times quota reclaim's circuit breaker opened, by its reason.",
            ["reason"],
            registry=registry,
        )
        writes = Counter(
            "tessera_controller_quota_writes_total",
            "Writes to ElasticQuotas, by the part written.",
            ["part"],
            registry=registry,
        )
        self.status_writes = writes.labels("status")
        self.annotation_writes = writes.labels("annotations")
        self._lock = threading.Lock()
        #: (quota, namespace) -> figure -> resources with a sample, so that a resource gone is removed.
        self._shown: dict[tuple[str, str], dict[str, set[str]]] = {}
        self._last: dict[tuple[str, str], dict[str, dict[str, int]]] = {}

    def set(self, quota: str, namespace: str, figures: Mapping[str, Mapping[str, int]]) -> None:
        """Every figure of one quota (figure name -> resource -> amount), replacing the last."""
        with self._lock:
            if self._last.get((quota, namespace)) == figures:
                return  # the common case: a pass over every quota after a change elsewhere
            self._last[(quota, namespace)] = {f: dict(a) for f, a in figures.items()}
            shown = self._shown.setdefault((quota, namespace), {})
            for figure, gauge in self._gauges.items():
                amounts = figures.get(figure, {})
                for resource in shown.get(figure, set()) - set(amounts):
                    gauge.remove(quota, namespace, resource)
                for resource, amount in amounts.items():
                    gauge.labels(quota, namespace, resource).set(amount)
                shown[figure] = set(amounts)

    def tree(self, root: Mapping[str, int], excess: Mapping[str, int]) -> None:
        """The figures reclaim's circuit breaker watches (per resource, base units)."""
        with self._lock:
            for figure, amounts in (("root_total", root), ("excess", excess)):
                gauge = self._tree[figure]
                for resource in self._tree_shown.get(figure, set()) - set(amounts):
                    gauge.remove(resource)
                for resource, amount in amounts.items():
                    gauge.labels(resource).set(amount)
                self._tree_shown[figure] = set(amounts)

    def evicted(self, quota: str, namespace: str) -> None:
        self.evictions.labels(quota, namespace).inc()

    def forget(self, quota: str, namespace: str) -> None:
        """The quota is gone: its series go too."""
        with self._lock:
            self._last.pop((quota, namespace), None)
            shown = self._shown.pop((quota, namespace), {})
            for figure, resources in shown.items():
                for resource in resources:
                    self._gauges[figure].remove(quota, namespace, resource)
