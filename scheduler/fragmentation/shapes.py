"""What FGD measures against: task shapes and the target workload, and the shape of a pod.

A target workload is a mix of task shapes with integer weights. Its shapes come from pods
(`task_shape`, `workload_of`: the fixed workload `tessera simulate` and `tessera what-if` use),
from a plugin's arguments (`args`) or from the learner (`learner`); the measure (`measure`)
reads them. Pure: values and functions over a pod's parsed facts (`PodInfo`).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass

from apis.crds.device import DeviceType
from apis.extension import names
from apis.extension.devicerequest import DeviceRequest, gpu_allocation_resources
from apis.k8s.core import Pod
from apis.k8s.labels import Operator
from scheduler.cache import PodInfo

__all__ = [
    "WEIGHT_SCALE",
    "WHOLE_GPU",
    "TargetWorkload",
    "TaskShape",
    "gpu_models",
    "gpu_share",
    "shape_order",
    "task_shape",
    "workload_of",
]

#: Total weight of a learned workload (its weights are parts per million).
WEIGHT_SCALE = 1_000_000
#: One whole GPU in the protocol's unit of a GPU share (percent).
WHOLE_GPU = 100


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


def task_shape(pod: PodInfo) -> TaskShape:
    """The shape of a pod as the workload counts it (an invalid device request counts as none:
    DeviceShare rejects the pod anyway)."""
    requests = pod.requests
    gpus = percent = 0
    gpu = pod.device_requests.get(DeviceType.GPU)
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
    return min(max(per.get(names.GPU_CORE, 0), per.get(names.GPU_MEMORY_RATIO, 0)), WHOLE_GPU)


def workload_of(pods: Iterable[PodInfo]) -> tuple[tuple[TaskShape, int], ...]:
    """The shape mix of `pods`, each shape weighted by how many pods have it, most common
    first: a fixed target workload (the trace's own mix in `tessera simulate`, as FGD's
    evaluation uses; the snapshot's pods in `tessera what-if`)."""
    counts = collections.Counter(task_shape(p) for p in pods)
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], shape_order(kv[0]))))


def shape_order(shape: TaskShape) -> tuple[int, int, int, int, tuple[str, ...]]:
    """A total order on shapes, so equal weights are cut the same way every run."""
    return (shape.gpus, shape.gpu_percent, shape.milli_cpu, shape.memory, tuple(sorted(shape.models)))
