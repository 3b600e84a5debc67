"""GPUFragmentation: prefers the node whose GPU fragmentation grows least (FGD, USENIX ATC'23).

The measure and its arithmetic are `scheduler.fragmentation`'s: for a pod, each
feasible node is scored by the usable GPU the placement would cost the target workload — GPU
shares that shapes of the workload could use before and no longer can, because the GPU is now
too full for them or the node too short of CPU or memory for them to run at all. The GPU a
share goes to is the one losing least (what DeviceShare's FragmentationAware policy picks);
whole GPUs are all alike to the measure.

- PreFilter records the pod's shape in the learned workload (when learning) and its request.
- Score is minus the loss; normalization gives the least-loss nodes 100 and spreads the rest
  over 0…99, so the best placement wins whatever the spread of losses (kube's linear scaling
  would round close losses together).
- Per node, a `NodeTable` (the shapes the node's CPU, memory and GPU model admit) is kept while
  the node's generation and the workload's version hold: only the node the last pod went to is
  rebuilt. `memo_key` lets the framework reuse scores for pods of the same request.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from apis.crds.device import DeviceType
from apis.extension import names
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
        state.write(NAME, PodState(requests.get(names.CPU, 0), requests.get(names.MEMORY, 0), gpu, workload.version))
        return None, SUCCESS

    def memo_key(self, state: CycleState, pod: PodInfo) -> Hashable:
        found = state.read(NAME, PodState)
        return found.key if found is not None else None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        found = state.read(NAME, PodState)
        if found is None or not self._index.workload.shapes:
            return 0
        table = self._table(node, found.version)
        return -loss(table, node, found, self._index.demand)

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """Least loss -> 100; the others linearly over 0…99 by how much more they lose."""
        if not scores:
            return
        best, worst = max(scores), min(scores)
        if best == worst:
            scores[:] = [MAX_NODE_SCORE] * len(scores)
            return
        span = best - worst
        top = MAX_NODE_SCORE - 1
        scores[:] = [MAX_NODE_SCORE if s == best else (s - worst) * top // span for s in scores]

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
    states = node.devices.states(DeviceType.GPU)
    memory = states[0].info.resources.get(names.GPU_MEMORY, 0) if states else 0
    take = fragmentation.gpu_share(gpu, memory)
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


def new(args: Mapping[str, object] | None, handle: Handle) -> GPUFragmentation:
    """Raises ConfigError for bad arguments."""
    return GPUFragmentation(GPUFragmentationArgs.from_dict(args), handle)
