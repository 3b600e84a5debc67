"""The cluster's GPUs by model, and how scarce each shape's GPUs are.

Why. FGD weighs a shape by its popularity alone: a GPU that 5 % of the workload could use
counts 5 % of a task, whether those tasks can go to 6,000 GPUs or to 265. A shape that asks for
a GPU model can use only that model's GPUs, so each of them is worth more to it: when a third
of the pods ask for a model, the popular small models (T4, P100, V100 on the Alibaba trace)
receive about as much constrained demand as they have GPUs, and FGD — BalancedFGD more so —
lets pods that could go anywhere take them (docs/scheduling.md measures it). Weighing each
shape by its popularity *per GPU it can use* — popularity × all GPUs / the GPUs of the models
it accepts (`GPUSupply.scarcity`) — makes a GPU worth the demand that may come for it: a model
wanted by few pods per GPU is cheap to use, one wanted by many is kept for them. A shape that
accepts every model keeps its weight, so a workload without model constraints is measured as
before.

`SupplyTracker` keeps the counts in step with the cluster cache, looking only at the nodes
changed since it last looked; the plugins of a profile share one (`shared_supply`).
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.crds.device import DeviceType
from apis.extension import names
from scheduler.cache import ClusterCache, NodeInfo
from scheduler.framework.interfaces import Handle

__all__ = ["NO_SUPPLY", "GPUSupply", "SupplyTracker", "shared_supply"]


@dataclass(frozen=True, slots=True)
class GPUSupply:
    """GPUs by GPU model (`node.koordinator.sh/gpu-model`; "" for nodes without the label)."""

    by_model: tuple[tuple[str, int], ...] = ()

    @property
    def total(self) -> int:
        return sum(count for _, count in self.by_model)

    def scarcity(self, models: frozenset[str]) -> float:
        """How many times fewer GPUs a shape accepting `models` can use than one accepting any:
        all GPUs / the GPUs of those models (1 for any model, or when none of them has GPUs
        here: such a shape runs nowhere, and no node's measure counts it)."""
        if not models:
            return 1.0
        mine = sum(count for model, count in self.by_model if model in models)
        return self.total / mine if mine else 1.0


#: No GPUs known: every shape weighs its popularity alone (the paper's FGD).
NO_SUPPLY = GPUSupply()


class SupplyTracker:
    """The cache's GPUs by model, kept current from the nodes changed since the last look."""

    __slots__ = ("_cache", "_counts", "_current", "_cursor", "_nodes")

    def __init__(self, cache: ClusterCache) -> None:
        self._cache = cache
        self._cursor = 0
        #: node -> (its model, its GPUs) as last counted
        self._nodes: dict[str, tuple[str, int]] = {}
        self._counts: dict[str, int] = {}
        self._current = NO_SUPPLY

    def current(self) -> GPUSupply:
        """The supply now: the same object while no node's model or GPU count has changed."""
        self._cursor, changed = self._cache.changes_since(self._cursor)
        if changed is None:
            self._nodes.clear()
            self._counts.clear()
            changed = tuple(info.name for info in self._cache.nodes())
        moved = False
        for name in changed:
            info = self._cache.node(name)
            now = _count(info) if info is not None else None
            before = self._nodes.pop(name, None)
            if before == now:
                if now is not None:
                    self._nodes[name] = now
                continue
            moved = True
            if before is not None:
                self._counts[before[0]] -= before[1]
            if now is not None:
                self._nodes[name] = now
                self._counts[now[0]] = self._counts.get(now[0], 0) + now[1]
        if moved:
            self._current = GPUSupply(tuple(sorted((m, c) for m, c in self._counts.items() if c > 0)))
        return self._current


def _count(info: NodeInfo) -> tuple[str, int] | None:
    if info.node is None:
        return None
    gpus = len(info.devices.states(DeviceType.GPU))
    return (info.node.labels.get(names.LABEL_GPU_MODEL, ""), gpus) if gpus else None


def shared_supply(handle: Handle) -> SupplyTracker:
    """The profile's tracker, shared through the handle (GPUFragmentation and DeviceShare
    measure against one workload index, built for one supply)."""
    return handle.shared_object((__name__, "supply"), lambda: SupplyTracker(handle.cache), SupplyTracker)
