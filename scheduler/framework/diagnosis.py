"""Why a pod did not fit: every Filter rejection kept per node, and the messages built from them.

The scheduler service turns this into the pod's condition and event (`summary`), `tessera
explain` into per-node reasons and near misses (`nearest`), `tessera what-if` into grouped
reasons (`grouped`). Statuses keep their plugin and `Shortfall`s, so nothing needs parsing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from scheduler.framework.status import Shortfall, Status

__all__ = ["Diagnosis"]


@dataclass(slots=True)
class Diagnosis:
    #: node name -> the first Filter rejection on that node
    node_statuses: dict[str, Status] = field(default_factory=dict)
    #: Set when PreFilter rejected the pod outright (no node was looked at).
    pre_filter_status: Status | None = None
    #: What PostFilter (preemption) said, if it ran.
    post_filter_status: Status | None = None

    def unschedulable_plugins(self) -> frozenset[str]:
        """Plugins that rejected the pod somewhere: the events of these may make it fit."""
        found = {s.plugin for s in self.node_statuses.values() if s.plugin}
        if self.pre_filter_status is not None and self.pre_filter_status.plugin:
            found.add(self.pre_filter_status.plugin)
        return frozenset(found)

    def reasons_by_node(self) -> dict[str, list[str]]:
        return {node: list(s.reasons) for node, s in sorted(self.node_statuses.items())}

    def grouped(self) -> list[tuple[int, str]]:
        """(number of nodes, reason), most frequent first, then by reason."""
        counts = Counter(r for s in self.node_statuses.values() for r in s.reasons)
        return sorted(((n, r) for r, n in counts.items()), key=lambda x: (-x[0], x[1]))

    def summary(self, total_nodes: int) -> str:
        """kube-scheduler's one line: `0/12 nodes are available: 8 Insufficient gpu devices, …`."""
        head = f"0/{total_nodes} nodes are available:"
        if self.pre_filter_status is not None:
            text = f"{head} {self.pre_filter_status.message.rstrip('.')}."  # a reason may end a sentence itself
        else:
            parts = [f"{n} {r}" for n, r in self.grouped()]
            text = f"{head} {', '.join(parts)}." if parts else f"{head} no nodes to schedule on."
        if self.post_filter_status is not None and self.post_filter_status.reasons:
            text += f" {self.post_filter_status.message}"
        return text

    def nearest(self, limit: int = 3) -> list[tuple[str, tuple[Shortfall, ...]]]:
        """Nodes that missed by resources alone, closest first: fewest shortfalls, then the
        smallest relative deficit. Nodes rejected for other reasons (taints, affinity) are not
        near misses."""

        def distance(shortfalls: tuple[Shortfall, ...]) -> tuple[int, float]:
            gap = sum((s.needed - s.free) / s.needed for s in shortfalls if s.needed > 0)
            return len(shortfalls), gap

        near = [(node, s.shortfalls) for node, s in self.node_statuses.items() if s.shortfalls]
        near.sort(key=lambda item: (*distance(item[1]), item[0]))
        return near[:limit]
