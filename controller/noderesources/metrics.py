"""Metrics of the node device resources controller (registered on the manager's registry).

| metric | type | labels |
| --- | --- | --- |
| `tessera_controller_node_writes_total` | counter | part: `status` (allocatable/capacity), `labels` |
| `tessera_controller_node_deferred_updates_total` | counter | — (small increases held back, counted once each) |
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

__all__ = ["NodeResourcesMetrics"]


class NodeResourcesMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        writes = Counter(
            "tessera_controller_node_writes_total", "Writes to Nodes, by the part written.", ["part"], registry=registry
        )
        self.status_writes = writes.labels("status")
        self.label_writes = writes.labels("labels")
        self.deferred = Counter(
            "tessera_controller_node_deferred_updates_total",
            "Increases below the diff threshold held back (written later or with the next urgent change).",
            registry=registry,
        )
