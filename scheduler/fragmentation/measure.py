"""The fragmentation measure of FGD and the arithmetic that makes it cheap per node.

The measure. A target workload is a set of task shapes m — CPU, memory, a number of GPUs with a
share of each, the GPU models it accepts — with popularity p_m. The GPU resources of a node n
that a task of shape m could not use are n's fragments for m, F_n(m):

- m cannot run on n at all (too little CPU or memory left, another GPU model, fewer GPUs with
  the per-GPU share free than it needs): every unallocated GPU share on n;
- otherwise: the unallocated share of the GPUs that have less free than m asks of one GPU.

F_n = Σ_m p_m F_n(m) is the node's expected fragmentation; FGD places each task where it grows
least. A task that asks for no GPU can use no GPU: all of a node's free GPU is fragment for it.

Computing it fast. Write T_n for the node's unallocated GPU and U_n(m) for the part m can use
(T_n − F_n(m) when m can run, else 0). Then F_n = P·T_n − V_n with P = Σ_m p_m and
V_n = Σ_m p_m U_n(m), the *usable* GPU. A pod taking d of GPU lowers T by d wherever it goes, so
ΔF_n = −P·d + (V_n − V_n′): the least growth of fragmentation is the least *loss of usable GPU*
V_n − V_n′ ≥ 0, and shapes asking for no GPU drop out. The loss needs no pass over the workload:

- single-GPU shapes (`Demand.cum`, cumulative weight by per-GPU share x = 0…100): taking d from
  a GPU with f free costs d·cum[f − d] (shapes that still fit there lose d) plus
  f·(cum[f] − cum[f − d]) (shapes that no longer fit there lose all f);
- multi-GPU shapes (few: 2, 4, 8 whole GPUs): their usable GPU is recounted from the free list;
- shapes that stop fitting the node's CPU or memory (`NodeTable`, sorted by CPU and by memory,
  so only those are visited) lose what they could still have used.

Balance. F_n looks at one task of each shape at a time: a node with six idle GPUs and CPU left
for one task is, for every shape that fits once, six usable GPUs. Under a workload that asks
more CPU (or memory) per GPU than such nodes have, most of those GPUs are stranded whatever
is placed. `Balance` estimates that part: the node's free GPU beyond what its free CPU and
memory could feed at the workload's own ratios (CPU and memory per percent of GPU, over its
GPU shapes), S_n = max(0, T_n − min(C_n / r_cpu, M_n / r_memory)). A placement's change of
S_n, weighted like a loss, is what the balanced policy adds: it steers CPU-light GPU pods to
CPU-poor nodes and CPU-heavy pods (and CPU-only ones) to where CPU is plentiful.

Scarcity. Per node, a shape that accepts only some GPU models weighs its popularity per GPU it
can use — × all GPUs / the GPUs of those models (`supply.GPUSupply.scarcity`) — so a GPU of a
model few tasks can use but many of them ask for costs what it is worth to them; a shape that
accepts any model keeps its weight (`WorkloadIndex`).

Units: GPU in percent of one GPU (the protocol's unit); weights are integers, WEIGHT_SCALE in
all for a learned workload (× 1,000 when scarcity applies); a loss is weight × percent.
Everything here is pure and exact (integers only), so the plugin and the policy agree to the
unit.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from apis.extension import names
from scheduler.cache.devices import DeviceState
from scheduler.fragmentation.plan import PackingPlan
from scheduler.fragmentation.shapes import WHOLE_GPU, TargetWorkload, TaskShape
from scheduler.fragmentation.supply import NO_SUPPLY, GPUSupply

__all__ = [
    "Balance",
    "Demand",
    "NodeResources",
    "NodeTable",
    "WorkloadIndex",
    "can_run",
    "fragmentation",
    "gpu_free",
    "usable",
]


@dataclass(frozen=True, slots=True)
class NodeResources:
    """What is left on a node, as the measure sees it."""

    milli_cpu: int
    memory: int
    gpu_model: str
    #: Percent free on each GPU (0 for an unhealthy one), in the node's device order.
    gpu_free: tuple[int, ...]


def usable(free: Sequence[int], gpus: int, percent: int) -> int:
    """Free GPU a task asking `gpus` GPUs with `percent` free each could use: the free share of
    every GPU with at least `percent` free, or 0 when fewer than `gpus` such GPUs exist."""
    count = total = 0
    for f in free:
        if f >= percent:
            count += 1
            total += f
    return total if count >= gpus else 0


def can_run(node: NodeResources, shape: TaskShape) -> bool:
    """Whether a task of `shape` fits what is left on the node (CPU, memory, model, GPUs)."""
    if shape.milli_cpu > node.milli_cpu or shape.memory > node.memory:
        return False
    if shape.models and node.gpu_model not in shape.models:
        return False
    return not shape.uses_gpu or usable(node.gpu_free, shape.gpus, shape.gpu_percent) > 0


def fragmentation(node: NodeResources, workload: TargetWorkload) -> int:
    """The paper's measure, Σ_m p_m F_n(m) (weight × percent): straight from the definition,
    for tests and diagnostics; the scheduler uses `NodeTable.loss`."""
    total_free = sum(node.gpu_free)
    out = 0
    for shape, weight in workload.shapes:
        if not shape.uses_gpu or not can_run(node, shape):
            out += weight * total_free
        else:
            out += weight * sum(f for f in node.gpu_free if f < shape.gpu_percent)
    return out


class Demand:
    """The GPU side of a set of shapes, arranged for `loss`: see the module docstring. With a
    `plan`, a share of one GPU joining a GPU off the plan (`PackingPlan.on_plan`) costs, on top,
    what taking it from a free GPU would: off the plan is the last resort, after a free GPU."""

    __slots__ = ("cum", "multi", "plan")

    def __init__(self, shapes: Iterable[tuple[TaskShape, int]], plan: PackingPlan | None = None) -> None:
        self.plan = plan
        weights = [0] * (WHOLE_GPU + 1)
        multi: dict[tuple[int, int], int] = {}
        for shape, weight in shapes:
            if not shape.uses_gpu:
                continue
            percent = min(shape.gpu_percent, WHOLE_GPU)
            if shape.gpus == 1:
                weights[percent] += weight
            else:
                key = (percent, shape.gpus)
                multi[key] = multi.get(key, 0) + weight
        running = 0
        cum = []
        for w in weights:
            running += w
            cum.append(running)
        #: cum[x]: weight of single-GPU shapes asking at most x percent.
        self.cum: list[int] = cum
        #: (percent, gpus, weight) of shapes asking for two GPUs or more.
        self.multi: tuple[tuple[int, int, int], ...] = tuple((p, k, w) for (p, k), w in sorted(multi.items()))

    def loss(self, free: Sequence[int], changes: Sequence[tuple[int, int]]) -> int:
        """Usable GPU lost when `changes` — (GPU index, percent taken) — are applied to `free`."""
        cum = self.cum
        out = 0
        for index, take in changes:
            f = free[index]
            left = f - take if f > take else 0
            out += take * cum[left] + f * (cum[f] - cum[left])
        plan = self.plan
        if plan is not None and len(changes) == 1:
            index, take = changes[0]
            if take < WHOLE_GPU and not plan.on_plan(WHOLE_GPU - free[index], take):
                left = WHOLE_GPU - take
                out += take * cum[left] + WHOLE_GPU * (cum[WHOLE_GPU] - cum[left])
        for percent, gpus, weight in self.multi:
            count = total = 0
            for f in free:
                if f >= percent:
                    count += 1
                    total += f
            before = total if count >= gpus else 0
            if not before:
                continue
            for index, take in changes:
                f = free[index]
                if f >= percent:
                    if f - take >= percent:
                        total -= take
                    else:
                        count -= 1
                        total -= f
            out += weight * (before - (total if count >= gpus else 0))
        return out


@dataclass(frozen=True, slots=True)
class Balance:
    """The CPU and memory a workload's GPU tasks ask per unit of GPU, as sums over its GPU
    shapes (weight × amount), and the GPU of a node they would leave stranded."""

    #: Σ weight × GPUs × percent.
    gpu: int = 0
    #: Σ weight × milli-CPU.
    milli_cpu: int = 0
    #: Σ weight × bytes.
    memory: int = 0

    @classmethod
    def of(cls, shapes: Iterable[tuple[TaskShape, int]]) -> Balance:
        gpu = cpu = memory = 0
        for shape, weight in shapes:
            if shape.uses_gpu:
                gpu += weight * shape.gpus * min(shape.gpu_percent, WHOLE_GPU)
                cpu += weight * shape.milli_cpu
                memory += weight * shape.memory
        return cls(gpu, cpu, memory)

    def stranded(self, gpu_free: int, milli_cpu: int, memory: int) -> int:
        """Percent of GPU among `gpu_free` that `milli_cpu` and `memory` cannot feed at the
        workload's ratios (0 without GPU shapes)."""
        fed = gpu_free
        if self.milli_cpu:
            fed = min(fed, max(0, milli_cpu) * self.gpu // self.milli_cpu)
        if self.memory:
            fed = min(fed, max(0, memory) * self.gpu // self.memory)
        return gpu_free - fed


@dataclass(frozen=True, slots=True)
class _Fit:
    """A GPU shape of the workload, as the per-node arithmetic reads it."""

    milli_cpu: int
    memory: int
    gpus: int
    gpu_percent: int
    weight: int


class _Admitted:
    """The shapes a class of nodes admits (by CPU, memory and model), shared by those nodes."""

    __slots__ = ("by_cpu", "by_memory", "demand")

    def __init__(self, fits: Sequence[_Fit], plan: PackingPlan | None) -> None:
        shapes = ((TaskShape(f.milli_cpu, f.memory, f.gpus, f.gpu_percent), f.weight) for f in fits)
        self.demand = Demand(shapes, plan)
        self.by_cpu = sorted(fits, key=lambda f: -f.milli_cpu)
        self.by_memory = sorted(fits, key=lambda f: -f.memory)


#: Weights are multiplied by this before scarcity factors are applied (see WorkloadIndex).
_SCARCITY_RESOLUTION = 1000


class WorkloadIndex:
    """A workload's GPU shapes arranged for per-node work. Which shapes a node admits depends
    only on its GPU model and on how many shapes its free CPU and free memory each cover, so
    nodes alike in those share one `Demand` (at first, all nodes of a model)."""

    __slots__ = (
        "_admitted",
        "_cpus",
        "_fits",
        "_memories",
        "balance",
        "demand",
        "plan",
        "supply",
        "total_weight",
        "version",
        "workload",
    )

    _MAX_CLASSES = 1 << 14

    def __init__(
        self,
        workload: TargetWorkload,
        *,
        packing: bool = False,
        supply: GPUSupply = NO_SUPPLY,
        version: int | None = None,
    ) -> None:
        self.workload = workload
        self.supply = supply
        #: Changes whenever the workload or the supply does: results memoised per node under it
        #: stay exact (the workload's own version when not given).
        self.version = workload.version if version is None else version
        #: Which shares go together on a GPU (`packing`), for every Demand below.
        self.plan = PackingPlan.of(workload.gpu_shapes()) if packing else None
        #: The GPU demand of every GPU shape, whatever node it could run on: what DeviceShare's
        #: FragmentationAware policy places a share of one GPU by (it sees devices only).
        self.demand = Demand(workload.gpu_shapes(), self.plan)
        #: The GPU shapes' CPU and memory per GPU (the balanced policy's stranding estimate).
        self.balance = Balance.of(workload.gpu_shapes())
        # Per node, a shape weighs its popularity per GPU it can use (`GPUSupply.scarcity`): the
        # same for every shape that accepts any model, more for one that accepts few GPUs. With
        # such shapes every weight is scaled by _SCARCITY_RESOLUTION first, so that rounding
        # the products keeps three digits (a fixed workload's weights are small counts).
        scarcity = {s: supply.scarcity(s.models) for s, _ in workload.gpu_shapes() if s.models}
        scale = _SCARCITY_RESOLUTION if any(f != 1.0 for f in scarcity.values()) else 1
        #: P: the weight of every shape, GPU or not (a loss per task of the workload is loss / P).
        self.total_weight = scale * sum(w for _, w in workload.shapes)
        fits = [
            (s, _Fit(s.milli_cpu, s.memory, s.gpus, s.gpu_percent, round(w * scale * scarcity.get(s, 1.0))))
            for s, w in workload.gpu_shapes()
        ]
        self._fits = fits
        self._cpus = sorted(f.milli_cpu for _, f in fits)
        self._memories = sorted(f.memory for _, f in fits)
        self._admitted: dict[tuple[str, int, int], _Admitted] = {}

    def table(self, node: NodeResources) -> NodeTable:
        """The node against this workload."""
        cpu_rank = bisect.bisect_right(self._cpus, node.milli_cpu)
        memory_rank = bisect.bisect_right(self._memories, node.memory)
        key = (node.gpu_model, cpu_rank, memory_rank)
        admitted = self._admitted.get(key)
        if admitted is None:
            if len(self._admitted) >= self._MAX_CLASSES:
                self._admitted.clear()
            admitted = self._admitted[key] = _Admitted(
                [
                    f
                    for s, f in self._fits
                    if f.milli_cpu <= node.milli_cpu
                    and f.memory <= node.memory
                    and (not s.models or node.gpu_model in s.models)
                ],
                self.plan,
            )
        return NodeTable(node, admitted)


class NodeTable:
    """One node against one workload (`WorkloadIndex.table`): `loss` of any placement on it."""

    __slots__ = ("_admitted", "demand", "resources")

    def __init__(self, node: NodeResources, admitted: _Admitted) -> None:
        self.resources = node
        self._admitted = admitted
        #: The GPU demand of the shapes the node's CPU, memory and model admit.
        self.demand = admitted.demand

    def loss(self, milli_cpu: int, memory: int, changes: Sequence[tuple[int, int]]) -> int:
        """Usable GPU lost if a pod taking `milli_cpu`, `memory` and the GPU `changes` — (GPU
        index, percent) — were placed here: V_n − V_n′ of the module docstring."""
        free = self.resources.gpu_free
        out = self.demand.loss(free, changes) if changes else 0
        cpu_left = self.resources.milli_cpu - milli_cpu
        memory_left = self.resources.memory - memory
        gone: list[_Fit] = []
        for fit in self._admitted.by_cpu:
            if fit.milli_cpu <= cpu_left:
                break
            gone.append(fit)
        for fit in self._admitted.by_memory:
            if fit.memory <= memory_left:
                break
            if fit.milli_cpu <= cpu_left:  # not counted above
                gone.append(fit)
        if gone:
            after = list(free)
            for index, take in changes:
                after[index] -= take
            for fit in gone:
                out += fit.weight * usable(after, fit.gpus, fit.gpu_percent)
        return out


def gpu_free(states: Sequence[DeviceState]) -> tuple[int, ...]:
    """Percent free on each GPU, in device order: the least of its free core and memory ratio
    (an unhealthy GPU offers nothing)."""
    out = []
    for s in states:
        total = s.total
        free = WHOLE_GPU
        for name in (names.GPU_CORE, names.GPU_MEMORY_RATIO):
            if name in total:
                free = min(free, s.free(name))
        out.append(free if total else 0)
    return tuple(out)
