"""GPU fragmentation of a node against a target workload, after FGD (Weng et al., "Beware of
Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX
ATC'23). Shared by the GPUFragmentation score plugin (which node) and DeviceShare's
FragmentationAware policy (which GPU on it): plugins never import each other.

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

Units: GPU in percent of one GPU (the protocol's unit); weights are integers, WEIGHT_SCALE in
all for a learned workload; a loss is weight × percent. Everything here is pure and exact
(integers only), so the plugin and the policy agree to the unit.
"""

from __future__ import annotations

import bisect
import collections
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from apis.crds.device import DeviceType
from apis.errors import InvalidRequestError
from apis.extension import names
from apis.extension.devicerequest import DeviceRequest, device_requests, gpu_allocation_resources
from apis.k8s import resources
from apis.k8s.core import Pod
from apis.k8s.labels import Operator
from scheduler.cache import PodInfo
from scheduler.cache.devices import DeviceState
from scheduler.framework.interfaces import Handle

__all__ = [
    "WEIGHT_SCALE",
    "Demand",
    "LearnSettings",
    "NodeResources",
    "NodeTable",
    "TargetWorkload",
    "TaskShape",
    "WorkloadArgs",
    "WorkloadIndex",
    "WorkloadLearner",
    "can_run",
    "fragmentation",
    "gpu_free",
    "gpu_models",
    "gpu_share",
    "parse_workload_args",
    "shapes_to_args",
    "shared_learner",
    "task_shape",
    "usable",
    "workload_of",
]

#: Total weight of a learned workload (its weights are parts per million).
WEIGHT_SCALE = 1_000_000
_FULL = 100


@dataclass(frozen=True, slots=True)
class TaskShape:
    """What one kind of task asks for. `gpu_percent` is per GPU (100: whole GPUs)."""

    milli_cpu: int = 0
    memory: int = 0
    gpus: int = 0
    gpu_percent: int = 0
    #: GPU models the task accepts; empty: any.
    models: frozenset[str] = frozenset()

    @property
    def uses_gpu(self) -> bool:
        return self.gpus > 0 and self.gpu_percent > 0


@dataclass(frozen=True, slots=True)
class TargetWorkload:
    """Shapes with integer weights. `version` changes whenever the shapes or weights do, so
    results computed against one workload can be memoised under it."""

    shapes: tuple[tuple[TaskShape, int], ...] = ()
    version: int = 0

    def gpu_shapes(self) -> tuple[tuple[TaskShape, int], ...]:
        return tuple((s, w) for s, w in self.shapes if s.uses_gpu and w > 0)


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
    """The GPU side of a set of shapes, arranged for `loss`: see the module docstring."""

    __slots__ = ("cum", "multi")

    def __init__(self, shapes: Iterable[tuple[TaskShape, int]]) -> None:
        weights = [0] * (_FULL + 1)
        multi: dict[tuple[int, int], int] = {}
        for shape, weight in shapes:
            if not shape.uses_gpu:
                continue
            percent = min(shape.gpu_percent, _FULL)
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

    def __init__(self, fits: Sequence[_Fit]) -> None:
        self.demand = Demand((TaskShape(f.milli_cpu, f.memory, f.gpus, f.gpu_percent), f.weight) for f in fits)
        self.by_cpu = sorted(fits, key=lambda f: -f.milli_cpu)
        self.by_memory = sorted(fits, key=lambda f: -f.memory)


class WorkloadIndex:
    """A workload's GPU shapes arranged for per-node work. Which shapes a node admits depends
    only on its GPU model and on how many shapes its free CPU and free memory each cover, so
    nodes alike in those share one `Demand` (at first, all nodes of a model)."""

    __slots__ = ("_admitted", "_cpus", "_fits", "_memories", "demand", "workload")

    _MAX_CLASSES = 1 << 14

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload
        #: The GPU demand of every GPU shape, whatever node it could run on: what DeviceShare's
        #: FragmentationAware policy places a share of one GPU by (it sees devices only).
        self.demand = Demand(workload.gpu_shapes())
        fits = [(s, _Fit(s.milli_cpu, s.memory, s.gpus, s.gpu_percent, w)) for s, w in workload.gpu_shapes()]
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
                ]
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


def gpu_models(pod: Pod) -> frozenset[str]:
    """GPU models a pod accepts (empty: any), from its node selector and required node affinity
    on `node.koordinator.sh/gpu-model` (`In` only: other operators are read as any)."""
    selected = pod.node_selector.get(names.LABEL_GPU_MODEL)
    models: set[str] | None = {selected} if selected is not None else None
    affinity = pod.node_affinity
    if affinity is not None and affinity.required is not None:
        union: set[str] = set()
        for term in affinity.required:
            values = [
                set(r.values)
                for r in term.match_expressions
                if r.key == names.LABEL_GPU_MODEL and r.operator is Operator.IN
            ]
            if not values:
                union = set()  # one term accepts any model: so does the pod
                break
            union |= set.intersection(*values)
        if union:
            models = union if models is None else models & union
    return frozenset(models or ())


def gpu_free(states: Sequence[DeviceState]) -> tuple[int, ...]:
    """Percent free on each GPU, in device order: the least of its free core and memory ratio
    (an unhealthy GPU offers nothing)."""
    out = []
    for s in states:
        total = s.total
        free = _FULL
        for name in (names.GPU_CORE, names.GPU_MEMORY_RATIO):
            if name in total:
                free = min(free, s.free(name))
        out.append(free if total else 0)
    return tuple(out)


def task_shape(pod: PodInfo) -> TaskShape:
    """The shape of a pod as the workload counts it (an invalid device request counts as none:
    DeviceShare rejects the pod anyway)."""
    requests = pod.requests
    gpus = percent = 0
    try:
        gpu = device_requests(requests).get(DeviceType.GPU)
    except InvalidRequestError:
        gpu = None
    if gpu is not None:
        gpus, percent = gpu.count, gpu_share(gpu)
    return TaskShape(
        requests.get(names.CPU, 0),
        requests.get(names.MEMORY, 0),
        gpus,
        percent,
        gpu_models(pod.pod) if gpus else frozenset(),
    )


def gpu_share(request: DeviceRequest, gpu_memory: int = 0) -> int:
    """Percent of one GPU a GPU request takes on each of its GPUs: core or memory ratio,
    whichever is more, as DeviceShare allocates it on GPUs of `gpu_memory` bytes (a request in
    bytes alone takes 0 percent where the GPU's memory is unknown)."""
    per = gpu_allocation_resources(request, gpu_memory)
    return min(max(per.get(names.GPU_CORE, 0), per.get(names.GPU_MEMORY_RATIO, 0)), _FULL)


# --- the target workload: configured, or learned from the pods seen ----------------------------


@dataclass(frozen=True, slots=True)
class LearnSettings:
    """How a workload is learned: a histogram of shapes, each observation weighing 2^(1/halfLife)
    times the one before (old pods fade), cut to the `max_shapes` heaviest, republished every
    `refresh_every` observations (at 1, 2, 4, 8, … while fewer were seen)."""

    half_life: int = 10_000
    max_shapes: int = 64
    refresh_every: int = 1000


@dataclass(frozen=True, slots=True)
class WorkloadArgs:
    """`targetWorkload` of a plugin's arguments: fixed `shapes`, or learned (`learn`)."""

    shapes: tuple[tuple[TaskShape, int], ...] = ()
    learn: LearnSettings = LearnSettings()

    @property
    def learned(self) -> bool:
        return not self.shapes


_WORKLOAD_KEYS = frozenset({"learn", "shapes"})
_LEARN_KEYS = {"halfLife": "half_life", "maxShapes": "max_shapes", "refreshEvery": "refresh_every"}
_SHAPE_KEYS = frozenset({"cpu", "memory", "gpus", "gpuPercent", "models", "weight"})


def parse_workload_args(raw: object, *, where: str, problems: list[str]) -> WorkloadArgs:
    """`{learn: {halfLife, maxShapes, refreshEvery}}` or `{shapes: [{cpu, memory, gpus,
    gpuPercent, models, weight}]}`; absent: learned with the defaults. Appends to `problems`."""
    if raw is None:
        return WorkloadArgs()
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected a mapping with learn or shapes")
        return WorkloadArgs()
    problems += [f"{where}.{k}: unknown field (allowed: learn, shapes)" for k in raw if k not in _WORKLOAD_KEYS]
    if "learn" in raw and "shapes" in raw:
        problems.append(f"{where}: give learn or shapes, not both")
    if "shapes" in raw:
        return WorkloadArgs(shapes=_parse_shapes(raw["shapes"], f"{where}.shapes", problems))
    learn = raw.get("learn") or {}
    if not isinstance(learn, Mapping):
        problems.append(f"{where}.learn: expected a mapping")
        return WorkloadArgs()
    values = {}
    for key, value in learn.items():
        field = _LEARN_KEYS.get(str(key))
        if field is None:
            problems.append(f"{where}.learn.{key}: unknown field (allowed: {', '.join(sorted(_LEARN_KEYS))})")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"{where}.learn.{key}: expected a positive integer, got {value!r}")
        else:
            values[field] = value
    return WorkloadArgs(learn=LearnSettings(**values))


def workload_of(pods: Iterable[PodInfo]) -> tuple[tuple[TaskShape, int], ...]:
    """The shape mix of `pods`, each shape weighted by how many pods have it, most common
    first: a fixed target workload (the trace's own mix in `tessera simulate`, as FGD's
    evaluation uses; the snapshot's pods in `tessera what-if`)."""
    counts = collections.Counter(task_shape(p) for p in pods)
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], _order(kv[0]))))


def shapes_to_args(shapes: Iterable[tuple[TaskShape, int]]) -> dict[str, object]:
    """`targetWorkload` arguments naming these shapes: what `parse_workload_args` reads back."""
    return {
        "shapes": [
            {
                "cpu": f"{s.milli_cpu}m",
                "memory": str(s.memory),
                "gpus": s.gpus,
                "gpuPercent": s.gpu_percent,
                "models": sorted(s.models),
                "weight": w,
            }
            for s, w in shapes
        ]
    }


def _parse_shapes(raw: object, where: str, problems: list[str]) -> tuple[tuple[TaskShape, int], ...]:
    if not isinstance(raw, list) or not raw:
        problems.append(f"{where}: expected a non-empty list of shapes")
        return ()
    out = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{at}: expected a mapping")
            continue
        problems += [
            f"{at}.{k}: unknown field (allowed: {', '.join(sorted(_SHAPE_KEYS))})" for k in item if k not in _SHAPE_KEYS
        ]
        count = len(problems)
        cpu = _quantity(item.get("cpu", 0), names.CPU, f"{at}.cpu", problems)
        memory = _quantity(item.get("memory", 0), names.MEMORY, f"{at}.memory", problems)
        gpus = _int(item.get("gpus", 0), f"{at}.gpus", 0, 1 << 10, problems)
        percent = _int(item.get("gpuPercent", _FULL if gpus else 0), f"{at}.gpuPercent", 0, _FULL, problems)
        weight = _int(item.get("weight", 1), f"{at}.weight", 1, WEIGHT_SCALE, problems)
        models = item.get("models", [])
        if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
            problems.append(f"{at}.models: expected a list of GPU model names")
            models = []
        if gpus > 1 and 0 < percent < _FULL:
            problems.append(f"{at}: a shape of {gpus} GPUs must take whole GPUs (gpuPercent 100)")
        if len(problems) == count:
            out.append((TaskShape(cpu, memory, gpus, percent, frozenset(models)), weight))
    return tuple(out)


def _quantity(raw: object, name: str, where: str, problems: list[str]) -> int:
    try:
        value = resources.to_int(name, raw if isinstance(raw, str) else str(raw))
    except ValueError as e:
        problems.append(f"{where}: {e}")
        return 0
    if value < 0:
        problems.append(f"{where}: must not be negative")
    return value


def _int(raw: object, where: str, low: int, high: int, problems: list[str]) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
        problems.append(f"{where}: expected an integer in {low}..{high}, got {raw!r}")
        return low
    return raw


class WorkloadLearner:
    """The target workload: fixed, or learned online from the pods a plugin sees.

    Learning keeps a histogram of shapes in which each observation weighs 2^(1/halfLife) times
    the one before, so the workload follows a cluster whose mix changes, and counts a pod once
    however often it is retried (by identity, over a bounded window). The published workload
    (`current`) changes only every `refresh_every` observations — sooner at the start, when
    every pod says a lot — so per-node results memoised under its version stay useful.
    Deterministic: no clock, only the order of observations.
    """

    __slots__ = ("_args", "_current", "_growth", "_histogram", "_index", "_scale", "_seen", "_since", "_total")

    _MAX_TRACKED = 4096
    _SEEN_WINDOW = 1 << 16

    def __init__(self, args: WorkloadArgs) -> None:
        self._args = args
        self._histogram: dict[TaskShape, float] = {}
        self._seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._growth = 2.0 ** (1.0 / args.learn.half_life)
        self._scale = 1.0
        self._since = 0
        self._total = 0
        self._current = TargetWorkload(args.shapes, 1) if args.shapes else TargetWorkload()
        self._index: WorkloadIndex | None = None

    @property
    def current(self) -> TargetWorkload:
        return self._current

    def index(self) -> WorkloadIndex:
        """The current workload arranged for per-node work (rebuilt when it changes)."""
        if self._index is None or self._index.workload is not self._current:
            self._index = WorkloadIndex(self._current)
        return self._index

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
        heaviest = sorted(self._histogram.items(), key=lambda kv: (-kv[1], _order(kv[0])))
        kept = heaviest[: self._args.learn.max_shapes]
        total = math.fsum(w for _, w in kept)
        shapes = tuple((s, weight) for s, w in kept if (weight := round(w * WEIGHT_SCALE / total)) > 0)
        if shapes != self._current.shapes:
            self._current = TargetWorkload(shapes, self._current.version + 1)


def _order(shape: TaskShape) -> tuple[int, int, int, int, tuple[str, ...]]:
    """A total order on shapes, so equal weights are cut the same way every run."""
    return (shape.gpus, shape.gpu_percent, shape.milli_cpu, shape.memory, tuple(sorted(shape.models)))


def shared_learner(handle: Handle, args: WorkloadArgs) -> WorkloadLearner:
    """The profile's learner for `args`, shared through the handle: GPUFragmentation (which
    node) and DeviceShare's FragmentationAware policy (which GPU) then measure against one
    workload, learned from the same pods, whichever of them sees a pod first."""
    return handle.shared_object((__name__, "learner", args), lambda: WorkloadLearner(args), WorkloadLearner)
