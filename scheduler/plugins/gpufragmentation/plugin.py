"""GPUFragmentation: prefers the node whose GPU fragmentation grows least (FGD, USENIX ATC'23).

The measure and its arithmetic are `scheduler.fragmentation`'s: for a pod, each
feasible node is scored by the usable GPU the placement would cost the target workload — GPU
shares that shapes of the workload could use before and no longer can, because the GPU is now
too full for them or the node too short of CPU or memory for them to run at all. The GPU a
share goes to is the one losing least (what DeviceShare's FragmentationAware policy picks);
whole GPUs are all alike to the measure.

- PreFilter records the pod's shape in the learned workload (when learning) and its request.
- Score is minus the loss, with the node's consolidation (the share of its GPUs already
  allocated) packed below it. Normalization treats losses within `tolerancePercent` of a GPU
  (per task of the workload) of the least as ties and gives the most consolidated of those
  100; the rest spread below. Without the tolerance, differences far below one task's worth
  of GPU decide and pods scatter over nodes that are all but equal; with it, pods pile onto
  nodes already in use and keep whole nodes free for the large tasks (the paper's integer
  sigmoid score and fixed node order have the same effect: docs/scheduling.md measures it).
- Per node, a `NodeTable` (the shapes the node's CPU, memory and GPU model admit) is kept while
  the node's generation and the workload's version hold: only the node the last pod went to is
  rebuilt. `memo_key` lets the framework reuse scores for pods of the same request.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from apis.crds.device import DeviceType
from apis.extension import names
from apis.extension.devicerequest import DeviceRequest
from scheduler import fragmentation
from scheduler.cache import NodeInfo, PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import MAX_NODE_SCORE, Handle, PreFilterPlugin, PreFilterResult, ScorePlugin
from scheduler.framework.status import SUCCESS, Status
from scheduler.plugins.gpufragmentation.args import GPUFragmentationArgs
from scheduler.plugins.gpufragmentation.state import PodState

NAME = "GPUFragmentation"


class GPUFragmentation(PreFilterPlugin, ScorePlugin):
    name = NAME
    normalizes = True

    def __init__(self, args: GPUFragmentationArgs, handle: Handle) -> None:
        self.args = args
        #: Shared with DeviceShare's FragmentationAware policy (`fragmentation.shared_learner`).
        self._learner = fragmentation.shared_learner(handle, args.workload)
        self._index = self._learner.index()
        #: node name -> (generation, workload version, table)
        self._tables: dict[str, tuple[int, int, fragmentation.NodeTable]] = {}

    @property
    def workload(self) -> fragmentation.TargetWorkload:
        """The target workload now (learned so far, or configured)."""
        return self._learner.current

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        workload = self._learner.observe(pod.ident, fragmentation.task_shape(pod))
        self._index = self._learner.index()
        gpu = pod.device_requests.get(DeviceType.GPU)  # none when invalid: DeviceShare rejects the pod
        requests = pod.requests
        tolerance = self.args.tolerance_percent * self._index.total_weight
        state.write(
            NAME,
            PodState(requests.get(names.CPU, 0), requests.get(names.MEMORY, 0), gpu, workload.version, tolerance),
        )
        return None, SUCCESS

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable:
        found = state.read(NAME, PodState)
        return found.key if found is not None else None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        found = state.read(NAME, PodState)
        if found is None or not self._index.workload.shapes:
            return 0
        table = self._table(node, found.version)
        lost = loss(table, node, found, self._index.demand)
        if self.args.balance_percent:
            index = self._index
            stranded = stranding(table.resources, node, found, index.balance)
            lost += stranded * index.total_weight * self.args.balance_percent // 100
        return pack(lost, consolidation(table.resources.gpu_free))

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """Losses within the tolerance of the least are ties: the most consolidated of them
        100, the others 90…99 by consolidation; nodes losing more 0…89 linearly by loss."""
        if not scores:
            return
        found = state.read(NAME, PodState)
        tolerance = found.tolerance if found is not None else 0
        parts = [unpack(s) for s in scores]
        least, most = min(p[0] for p in parts), max(p[0] for p in parts)
        near = least + tolerance
        packed = [consolidated for lost, consolidated in parts if lost <= near]
        low, high = min(packed), max(packed)
        out = []
        steps = MAX_NODE_SCORE - 1 - _NEAR_LOW
        for lost, consolidated in parts:
            if lost > near:
                out.append((most - lost) * _FAR_TOP // max(1, most - near))
            elif consolidated == high:
                out.append(MAX_NODE_SCORE)
            else:
                out.append(_NEAR_LOW + (consolidated - low) * steps // (high - low))
        scores[:] = out

    def _table(self, node: NodeInfo, version: int) -> fragmentation.NodeTable:
        cached = self._tables.get(node.name)
        if cached is not None and cached[0] == node.generation and cached[1] == version:
            return cached[2]
        allocatable, requested = node.allocatable, node.requested
        labels = node.node.labels if node.node is not None else {}
        resources = fragmentation.NodeResources(
            allocatable.get(names.CPU, 0) - requested.get(names.CPU, 0),
            allocatable.get(names.MEMORY, 0) - requested.get(names.MEMORY, 0),
            labels.get(names.LABEL_GPU_MODEL, ""),
            fragmentation.gpu_free(node.devices.states(DeviceType.GPU)),
        )
        table = self._index.table(resources)
        self._tables[node.name] = (node.generation, version, table)
        return table


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


def stranding(
    resources: fragmentation.NodeResources, node: NodeInfo, pod: PodState, balance: fragmentation.Balance
) -> int:
    """How much more of the node's GPU (percent) the workload could not feed with CPU and
    memory once the pod is placed there (negative: less)."""
    free = sum(resources.gpu_free)
    before = balance.stranded(free, resources.milli_cpu, resources.memory)
    after = balance.stranded(
        max(0, free - gpu_taken(node, pod)), resources.milli_cpu - pod.milli_cpu, resources.memory - pod.memory
    )
    return after - before


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
    states = node.devices.states(DeviceType.GPU)
    memory = states[0].info.resources.get(names.GPU_MEMORY, 0) if states else 0
    return fragmentation.gpu_share(gpu, memory)


def new(args: Mapping[str, object] | None, handle: Handle) -> GPUFragmentation:
    """Raises ConfigError for bad arguments."""
    return GPUFragmentation(GPUFragmentationArgs.from_dict(args), handle)
