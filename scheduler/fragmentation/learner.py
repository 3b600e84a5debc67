"""The target workload a profile measures fragmentation against: fixed, or learned online.

GPUFragmentation (which node) and DeviceShare's FragmentationAware policy (which GPU) each
count the pods they see in one `WorkloadLearner`, shared through the profile's `Handle`
(`shared_learner`), and measure against what it publishes.
"""

from __future__ import annotations

import collections
import math

from scheduler.fragmentation.args import WorkloadArgs
from scheduler.fragmentation.measure import WorkloadIndex
from scheduler.fragmentation.shapes import WEIGHT_SCALE, TargetWorkload, TaskShape, shape_order
from scheduler.fragmentation.supply import NO_SUPPLY, GPUSupply
from scheduler.framework.interfaces import Handle

__all__ = ["WorkloadLearner", "shared_learner"]


class WorkloadLearner:
    """The target workload: fixed, or learned online from the pods a plugin sees.

    Learning keeps a histogram of shapes in which each observation weighs 2^(1/halfLife) times
    the one before, so the workload follows a cluster whose mix changes, and counts a pod once
    however often it is retried (by identity, over a bounded window). The published workload
    (`current`) changes only every `refresh_every` observations — sooner at the start, when
    every pod says a lot — and only when the mix has moved by at least `_MIN_MOVE` (total
    variation distance, parts per million), so that per-node results memoised under its
    version stay useful: a new version makes every node's score stale, and a mix that only
    wobbles would otherwise cost a rescoring of the whole cluster each time.
    Learning starts from nothing — the first pods are measured against the few shapes seen so
    far — or from configured shapes counted as `prior_pods` pods, which then fade like them.
    Deterministic: no clock, only the order of observations.
    """

    __slots__ = (
        "_args",
        "_builds",
        "_current",
        "_growth",
        "_histogram",
        "_index",
        "_scale",
        "_seen",
        "_since",
        "_total",
    )

    _MAX_TRACKED = 4096
    #: 5% of the workload's weight must have moved between shapes for a new version: more
    #: than the sampling noise of a stable mix between refreshes (about 3% for 40 shapes
    #: and 1,000 pods), less than any real change of mix.
    _MIN_MOVE = WEIGHT_SCALE // 20
    _SEEN_WINDOW = 1 << 16

    def __init__(self, args: WorkloadArgs) -> None:
        self._args = args
        self._histogram: dict[TaskShape, float] = {}
        self._seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._growth = 2.0 ** (1.0 / args.learn.half_life)
        self._scale = 1.0
        self._since = 0
        self._total = 0
        self._current = TargetWorkload(args.shapes, 1) if args.shapes and not args.prior else TargetWorkload()
        if args.prior:  # learning starts from the configured shapes, as `prior_pods` pods seen
            total = sum(w for _, w in args.shapes)
            self._histogram = {s: w * args.learn.prior_pods / total for s, w in args.shapes}
            self._publish()
        self._index: WorkloadIndex | None = None
        self._builds = 0

    @property
    def current(self) -> TargetWorkload:
        return self._current

    def index(self, supply: GPUSupply = NO_SUPPLY) -> WorkloadIndex:
        """The current workload arranged for per-node work against the cluster's GPUs by model
        (rebuilt when either changes; its `version` then changes too)."""
        index = self._index
        if not self._args.model_scarcity:
            supply = NO_SUPPLY
        if index is None or index.workload is not self._current or index.supply != supply:
            self._builds += 1
            index = self._index = WorkloadIndex(
                self._current, packing=self._args.packing_plan, supply=supply, version=self._builds
            )
        return index

    def seen(self, ident: str) -> bool:
        """Whether the pod was counted already (or nothing is learned: no need to count it)."""
        return not self._args.learned or ident in self._seen

    def observe(self, ident: str, shape: TaskShape) -> TargetWorkload:
        """Count a pod (once per identity) and return the workload to use for it."""
        if not self._args.learned or ident in self._seen:
            return self._current
        self._seen[ident] = None
        if len(self._seen) > self._SEEN_WINDOW:
            self._seen.popitem(last=False)
        self._scale *= self._growth
        if self._scale > 1e100:  # keep the floats finite: rescale everything, order unchanged
            self._histogram = {s: w / self._scale for s, w in self._histogram.items()}
            self._scale = 1.0
        self._histogram[shape] = self._histogram.get(shape, 0.0) + self._scale
        if len(self._histogram) > self._MAX_TRACKED:
            lightest = min(self._histogram, key=self._histogram.__getitem__)
            del self._histogram[lightest]
        self._total += 1
        self._since += 1
        if self._since >= min(self._args.learn.refresh_every, max(1, self._total // 2)):
            self._publish()
        return self._current

    def _publish(self) -> None:
        self._since = 0
        heaviest = sorted(self._histogram.items(), key=lambda kv: (-kv[1], shape_order(kv[0])))
        shapes = tuple((s, weight) for s, w in _cut(heaviest, self._args.learn.max_shapes) if (weight := round(w)) > 0)
        if _moved(self._current.shapes, shapes) >= self._MIN_MOVE or not self._current.shapes:
            self._current = TargetWorkload(shapes, self._current.version + 1)


def _cut(heaviest: list[tuple[TaskShape, float]], max_shapes: int) -> list[tuple[TaskShape, float]]:
    """The `max_shapes` heaviest shapes (of `heaviest`, heaviest first), weighted to
    WEIGHT_SCALE in all so that every set of accepted GPU models keeps its share of the
    weight: the shapes of a set that are cut lend their weight to the set's shapes that are
    kept, and a set with none among the heaviest keeps its heaviest shape. Pods that ask for a
    GPU model come in many shapes, each rare (a cut to the heaviest dropped half of their
    weight on a mix where a third of the pods ask for one), and what a model's GPUs are worth
    depends on all of them (`fragmentation.supply`). A workload without model constraints is
    one set: its heaviest shapes, scaled up together, as ever."""
    kept = heaviest[:max_shapes]
    sets = {s.models for s, _ in kept}
    for shape, weight in heaviest[max_shapes:]:
        if shape.models not in sets:
            kept.append((shape, weight))
            sets.add(shape.models)
    everything = _by_models(heaviest)
    chosen = _by_models(kept)
    total = math.fsum(everything.values())
    return [(s, w * WEIGHT_SCALE / chosen[s.models] * (everything[s.models] / total)) for s, w in kept]


def _by_models(shapes: list[tuple[TaskShape, float]]) -> dict[frozenset[str], float]:
    """Total weight per set of accepted models."""
    parts: dict[frozenset[str], list[float]] = {}
    for shape, weight in shapes:
        parts.setdefault(shape.models, []).append(weight)
    return {models: math.fsum(weights) for models, weights in parts.items()}


def _moved(before: tuple[tuple[TaskShape, int], ...], after: tuple[tuple[TaskShape, int], ...]) -> int:
    """Total variation distance between two workloads of WEIGHT_SCALE each: the weight that
    would have to move from some shapes to others to turn one into the other."""
    old = dict(before)
    change = 0
    for shape, weight in after:
        change += abs(weight - old.pop(shape, 0))
    return (change + sum(old.values())) // 2


def shared_learner(handle: Handle, args: WorkloadArgs) -> WorkloadLearner:
    """The profile's learner for `args`, shared through the handle: GPUFragmentation (which
    node) and DeviceShare's FragmentationAware policy (which GPU) then measure against one
    workload, learned from the same pods, whichever of them sees a pod first."""
    return handle.shared_object((__name__, "learner", args), lambda: WorkloadLearner(args), WorkloadLearner)
