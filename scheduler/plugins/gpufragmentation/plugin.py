"""GPUFragmentation: prefers the node whose GPU fragmentation grows least (FGD, USENIX ATC'23).

The measure and its arithmetic are `scheduler.fragmentation`'s: for a pod, each
feasible node is scored by the usable GPU the placement would cost the target workload — GPU
shares that shapes of the workload could use before and no longer can, because the GPU is now
too full for them or the node too short of CPU or memory for them to run at all. The GPU a
share goes to is the one losing least (what DeviceShare's FragmentationAware policy picks);
whole GPUs are all alike to the measure.

- PreFilter records the pod's shape in the learned workload (when learning) and its request;
  pods the scheduler is told about before they are scheduled (`PodSetExtension`: a backlog at
  start, pods running at a restart) are counted as they are told.
- Score is minus the loss, with the node's consolidation (the share of its GPUs already
  allocated) packed below it. Normalization treats losses within `tolerancePercent` of a GPU
  (per task of the workload) of the least as ties and gives the most consolidated of those
  100; the rest spread below. Without the tolerance, differences far below one task's worth
  of GPU decide and pods scatter over nodes that are all but equal; with it, pods pile onto
  nodes already in use and keep whole nodes free for the large tasks (the paper's integer
  sigmoid score and fixed node order have the same effect: docs/scheduling.md measures it).
- Per node, a `_NodeView` (its `NodeTable`: the shapes the node's CPU, memory and GPU model
  admit; its stranded GPU and consolidation) is kept while the node's generation and the
  workload's version hold: only the node the last pod went to is rebuilt. `memo_key` lets
  the framework reuse scores for pods of the same request.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence

from apis.crds.device import DeviceType
from apis.extension import names
from apis.extension.devicerequest import DeviceRequest
from apis.k8s.core import Pod
from scheduler import fragmentation
from scheduler.cache import NodeInfo, PodInfo
from scheduler.cache.devices import DeviceState
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    Handle,
    PodSetExtension,
    PreFilterPlugin,
    PreFilterResult,
    ScorePlugin,
)
from scheduler.framework.status import SUCCESS, Status
from scheduler.plugins.gpufragmentation.args import GPUFragmentationArgs
from scheduler.plugins.gpufragmentation.state import PodState

NAME = "GPUFragmentation"


class GPUFragmentation(PreFilterPlugin, ScorePlugin, PodSetExtension):
    name = NAME
    normalizes = True

    def __init__(self, args: GPUFragmentationArgs, handle: Handle) -> None:
        self.args = args
        self._profile = handle.profile
        #: Shared with DeviceShare's FragmentationAware policy (`fragmentation.shared_learner`).
        self._learner = fragmentation.shared_learner(handle, args.workload)
        #: The cluster's GPUs by model (a shape asking for a scarce model weighs more).
        self._supply = fragmentation.shared_supply(handle)
        self._index = self._learner.index()
        #: node name -> what score needs of the node
        self._views: dict[str, _NodeView] = {}
        #: (what is left on a node, its GPUs' memory) -> a small number naming it.
        self._node_keys: dict[tuple[fragmentation.NodeResources, int], int] = {}
        self._numbers = itertools.count()
        #: (pod key, node key) -> raw score: nodes left alike (all the empty ones of a kind, say)
        #: are scored once per pod shape, whichever node they are.
        self._scores: dict[tuple[Hashable, Hashable], int] = {}

    @property
    def workload(self) -> fragmentation.TargetWorkload:
        """The target workload now (learned so far, or configured)."""
        return self._learner.current

    def pod_added(self, pod: Pod) -> None:
        """Count a pod of this profile that the scheduler is told about — pending or running —
        in the learned workload, before it comes up for scheduling: a scheduler that starts on
        a backlog, or restarts on a running cluster, then measures the first pods it places
        against the pods there are rather than against the few it has placed so far."""
        ident = pod.uid or pod.key  # PodInfo.ident, without parsing a pod already counted
        if pod.scheduler_name == self._profile and not self._learner.seen(ident):
            self._learner.observe(ident, fragmentation.task_shape(PodInfo.of(pod)))

    def pod_deleted(self, pod: Pod) -> None:
        """Nothing: the learned workload forgets pods by fading, not when they go."""

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        self._learner.observe(pod.ident, fragmentation.task_shape(pod))
        self._index = index = self._learner.index(self._supply.current())
        gpu = pod.device_requests.get(DeviceType.GPU)  # none when invalid: DeviceShare rejects the pod
        requests = pod.requests
        tolerance = self.args.tolerance_percent * index.total_weight
        state.write(
            NAME,
            PodState(requests.get(names.CPU, 0), requests.get(names.MEMORY, 0), gpu, index.version, tolerance),
        )
        return None, SUCCESS

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable:
        found = state.read(NAME, PodState)
        return found.request_key if found is not None else None

    def score_epoch(self, state: CycleState, pod: PodInfo) -> Hashable:
        """The workload index's version (a new workload or supply): it changes every node's
        score, no node's feasibility."""
        found = state.read(NAME, PodState)
        return found.version if found is not None else None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        found = state.read(NAME, PodState)
        if found is None or not self._index.workload.shapes:
            return 0
        view = self._view(node, found.version)
        key = (found.key, view.key)
        raw = self._scores.get(key)
        if raw is None:
            lost = loss(view.table, node, found, self._index.demand)
            if self.args.balance_percent:
                lost += self._stranding(view, node, found) * self.args.balance_percent // 100
            raw = pack(lost, view.consolidated)
            if len(self._scores) >= _MAX_SCORES:
                self._scores.clear()
            self._scores[key] = raw
        return raw

    def _stranding(self, view: _NodeView, node: NodeInfo, pod: PodState) -> int:
        """How much more of the node's GPU the workload could not feed with CPU and memory
        once the pod is placed there (negative: less), weighted like a loss."""
        index = self._index
        resources = view.resources
        after = index.balance.stranded(
            max(0, view.gpu_free - gpu_taken(node, pod)),
            resources.milli_cpu - pod.milli_cpu,
            resources.memory - pod.memory,
        )
        return (after - view.stranded) * index.total_weight

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """Losses within the tolerance of the least are ties: the most consolidated of them
        100, the others 90…99 by consolidation; nodes losing more 0…89 linearly by loss."""
        if not scores:
            return
        found = state.read(NAME, PodState)
        tolerance = found.tolerance if found is not None else 0
        # raw // scale = −loss (higher is better), raw % scale = consolidation. Nodes within the
        # tolerance are exactly those with raw ≥ (best − tolerance) · scale, so the loop below
        # compares plain ints and splits a raw score only where it must (this runs for every
        # feasible node of every pod).
        scale = _CONSOLIDATION_SCALE
        best = max(scores) // scale
        worst = min(scores) // scale
        near = best - tolerance
        threshold = near * scale
        packed = [s % scale for s in scores if s >= threshold]
        low, high = min(packed), max(packed)
        far_span = max(1, near - worst)
        steps = MAX_NODE_SCORE - 1 - _NEAR_LOW
        span = max(1, high - low)
        scores[:] = [
            (s // scale - worst) * _FAR_TOP // far_span
            if s < threshold
            else MAX_NODE_SCORE
            if s % scale == high
            else _NEAR_LOW + (s % scale - low) * steps // span
            for s in scores
        ]

    def _view(self, node: NodeInfo, version: int) -> _NodeView:
        view = self._views.get(node.name)
        if view is None or view.generation != node.generation:
            allocatable, requested = node.allocatable, node.requested
            labels = node.node.labels if node.node is not None else {}
            states = node.devices.states(DeviceType.GPU)
            resources = fragmentation.NodeResources(
                allocatable.get(names.CPU, 0) - requested.get(names.CPU, 0),
                allocatable.get(names.MEMORY, 0) - requested.get(names.MEMORY, 0),
                labels.get(names.LABEL_GPU_MODEL, ""),
                fragmentation.gpu_free(states),
            )
            # Nodes left alike share one number, so the score cache hashes an int. Numbers are
            # never reused: forgetting them (a bound on memory) only loses sharing.
            alike = (resources, _gpu_memory(states))
            key = self._node_keys.get(alike)
            if key is None:
                if len(self._node_keys) >= _MAX_SCORES:
                    self._node_keys.clear()
                key = self._node_keys[alike] = next(self._numbers)
            view = self._views[node.name] = _NodeView(node.generation, resources, key, self._index, version)
        elif view.version != version:
            view.against(self._index, version)
        return view


class _NodeView:
    """What score needs of one node that does not depend on the pod: what is left on it (kept
    while the node's generation holds), and its table and stranded GPU against the workload
    (while the workload's version holds too)."""

    __slots__ = ("consolidated", "generation", "gpu_free", "key", "resources", "stranded", "table", "version")

    table: fragmentation.NodeTable
    stranded: int
    version: int

    def __init__(
        self,
        generation: int,
        resources: fragmentation.NodeResources,
        key: int,
        index: fragmentation.WorkloadIndex,
        version: int,
    ) -> None:
        self.generation = generation
        self.resources = resources
        #: Equal for nodes that score alike for any pod (what is left, the GPUs' memory).
        self.key = key
        self.gpu_free = sum(resources.gpu_free)
        self.consolidated = consolidation(resources.gpu_free)
        self.against(index, version)

    def against(self, index: fragmentation.WorkloadIndex, version: int) -> None:
        """Measure the node against the workload `index` arranges (of `version`)."""
        self.table = index.table(self.resources)
        self.stranded = index.balance.stranded(self.gpu_free, self.resources.milli_cpu, self.resources.memory)
        self.version = version


#: Raw scores kept by (pod key, node key) before the cache starts over.
_MAX_SCORES = 1 << 16
#: A raw score is −loss × _CONSOLIDATION_SCALE + consolidation (0 ≤ consolidation < scale).
_CONSOLIDATION_SCALE = 1 << 20
#: Normalized scores: nodes beyond the tolerance get 0…_FAR_TOP, nodes within it _NEAR_LOW…100.
_FAR_TOP = 89
_NEAR_LOW = 90


def pack(lost: int, consolidated: int) -> int:
    """One raw score holding both: the loss decides, consolidation breaks what it leaves tied."""
    return -lost * _CONSOLIDATION_SCALE + consolidated


def unpack(raw: int) -> tuple[int, int]:
    """(loss, consolidation) of a raw score: what `pack` packed."""
    return -(raw // _CONSOLIDATION_SCALE), raw % _CONSOLIDATION_SCALE


def consolidation(free: tuple[int, ...]) -> int:
    """The share of the node's GPUs already allocated, in 0…_CONSOLIDATION_SCALE − 1 (0 for a
    node without GPUs): the fuller, the better a place for a pod the measure cannot tell apart."""
    if not free:
        return 0
    capacity = fragmentation.WHOLE_GPU * len(free)
    return (capacity - sum(free)) * (_CONSOLIDATION_SCALE - 1) // capacity


def loss(table: fragmentation.NodeTable, node: NodeInfo, pod: PodState, placing: fragmentation.Demand) -> int:
    """Usable GPU the pod would cost on this node, with its GPUs where DeviceShare puts them.

    Whole GPUs are all alike to the measure. A share of one GPU goes where FragmentationAware
    puts it: the GPU losing least against `placing`, the whole workload's GPU demand (that
    policy sees devices only, not the node's CPU and memory); among GPUs it ranks equal, which
    it then picks by topology, the one costing the node least is assumed.
    """
    gpu = pod.gpu
    free = table.resources.gpu_free
    if gpu is None:
        return table.loss(pod.milli_cpu, pod.memory, ())
    if not gpu.shared:
        idle = [i for i, f in enumerate(free) if f >= 100][: gpu.count]
        return table.loss(pod.milli_cpu, pod.memory, tuple((i, 100) for i in idle))
    take = _share(node, gpu)
    fits = [i for i, f in enumerate(free) if f >= take]
    if gpu.count > 1:  # a share of several GPUs: the fullest that fit, as best fit would
        fits.sort(key=lambda i: (free[i], i))
        return table.loss(pod.milli_cpu, pod.memory, tuple((i, take) for i in fits[: gpu.count]))
    best: tuple[int, int] | None = None
    seen: set[int] = set()
    for i in fits:
        if free[i] in seen:
            continue  # a GPU with as much free: the same losses
        seen.add(free[i])
        change = ((i, take),)
        rank = (placing.loss(free, change), table.loss(pod.milli_cpu, pod.memory, change))
        if best is None or rank < best:
            best = rank
    return best[1] if best is not None else 0


def gpu_taken(node: NodeInfo, pod: PodState) -> int:
    """Percent of GPU the pod takes on the node, over all its GPUs."""
    gpu = pod.gpu
    if gpu is None:
        return 0
    if not gpu.shared:
        return fragmentation.WHOLE_GPU * gpu.count
    return _share(node, gpu) * gpu.count


def _share(node: NodeInfo, gpu: DeviceRequest) -> int:
    """Percent of one GPU a shared request takes on each of its GPUs on this node."""
    return fragmentation.gpu_share(gpu, _gpu_memory(node.devices.states(DeviceType.GPU)))


def _gpu_memory(states: Sequence[DeviceState]) -> int:
    """Bytes of memory of the node's GPUs (the first one's: a node has one model)."""
    return states[0].info.resources.get(names.GPU_MEMORY, 0) if states else 0


def new(args: Mapping[str, object] | None, handle: Handle) -> GPUFragmentation:
    """Raises ConfigError for bad arguments."""
    return GPUFragmentation(GPUFragmentationArgs.from_dict(args), handle)
