"""The Alibaba GPU cluster trace (2023) as Tessera objects.

Rows of `openb_node_list_gpu_node.csv` become a Node and its Device CR (GPUs laid out as
`cluster.gpu_node` does; the trace gives no topology); rows of `openb_pod_list_*.csv` become
pods asking for devices the way a user of the protocol would:

- `num_gpu == 0`: CPU and memory only;
- `gpu_milli == 1000`: `nvidia.com/gpu: num_gpu` (whole GPUs on one node);
- otherwise a share of one GPU: `koordinator.sh/gpu-core` and `koordinator.sh/gpu-memory-ratio`
  of `gpu_milli / 10` percent each (rounded up: percent is the protocol's unit; the trace's
  shares are all multiples of 10 milli, so nothing is rounded in practice);
- `gpu_spec` (`A|B|…`): a required node affinity on `node.koordinator.sh/gpu-model` In A, B, ….

Parsing takes lines of text (the caller opens the files), so this module does no I/O.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass

from apis.crds.device import Device
from apis.errors import ValidationError
from apis.extension import names
from apis.k8s import labels
from apis.k8s.core import Container, NodeAffinity, NodeSelectorTerm, Pod
from apis.k8s.core import Node as CoreNode
from apis.k8s.meta import ObjectMeta
from scheduler import fragmentation
from scheduler.cache import PodInfo
from scheduler.simulation.cluster import GIB, NodeShape, gpu_node

__all__ = ["TraceNode", "TracePod", "parse_nodes", "parse_pods", "workload"]

_MIB = 1 << 20
#: GPU memory per model (only the ratio form is requested, so this only fills the annotation).
_GPU_MEMORY = {"P100": 16 * GIB, "T4": 16 * GIB, "V100M16": 16 * GIB, "V100M32": 32 * GIB, "A10": 24 * GIB}
_DEFAULT_GPU_MEMORY = 32 * GIB


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    milli_cpu: int
    memory_mib: int
    gpus: int
    model: str

    def to_objects(self) -> tuple[CoreNode, Device]:
        shape = NodeShape(
            gpus=self.gpus,
            gpu_model=self.model,
            gpu_memory=_GPU_MEMORY.get(self.model, _DEFAULT_GPU_MEMORY),
            nics_per_switch=0,
            milli_cpu=self.milli_cpu,
            memory=self.memory_mib * _MIB,
            max_pods=10_000,
        )
        return gpu_node(self.name, shape)


@dataclass(frozen=True, slots=True)
class TracePod:
    name: str
    milli_cpu: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...] = ()

    @property
    def gpu_milli_total(self) -> int:
        """GPU demand in thousandths of a GPU, as the trace's metric counts it."""
        return self.num_gpu * self.gpu_milli if self.num_gpu > 0 else 0

    def to_pod(self, name: str | None = None, *, namespace: str = "trace") -> Pod:
        requests = {names.CPU: self.milli_cpu, names.MEMORY: self.memory_mib * _MIB}
        if self.num_gpu > 0 and self.gpu_milli >= 1000:
            requests[names.NVIDIA_GPU] = self.num_gpu
        elif self.num_gpu > 0 and self.gpu_milli > 0:
            percent = -(-self.gpu_milli // 10) * self.num_gpu
            requests[names.GPU_CORE] = percent
            requests[names.GPU_MEMORY_RATIO] = percent
            if self.num_gpu > 1:
                requests[names.GPU_SHARED] = self.num_gpu
        affinity = None
        if self.gpu_spec:
            term = NodeSelectorTerm((labels.Requirement(names.LABEL_GPU_MODEL, labels.Operator.IN, self.gpu_spec),))
            affinity = NodeAffinity(required=(term,))
        pod_name = name or self.name
        return Pod(
            meta=ObjectMeta(name=pod_name, namespace=namespace, uid=f"{namespace}/{pod_name}"),
            scheduler_name=names.SCHEDULER_NAME,
            containers=(Container("main", requests=requests, limits=dict(requests)),),
            node_affinity=affinity,
        )


def _rows(lines: Iterable[str], required: tuple[str, ...], source: str) -> Iterable[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(lines)
    missing = [c for c in required if c not in (reader.fieldnames or ())]
    if missing:
        raise ValidationError(source, f"missing columns {', '.join(missing)}")
    yield from enumerate(reader, start=2)


def _int(row: dict[str, str], column: str, source: str, line: int) -> int:
    text = (row.get(column) or "0").strip()
    try:
        value = int(text)
    except ValueError:
        raise ValidationError(f"{source}:{line}", f"{column}={text!r} is not an integer") from None
    if value < 0:
        raise ValidationError(f"{source}:{line}", f"{column}={value} must not be negative")
    return value


def parse_nodes(lines: Iterable[str], *, source: str = "nodes") -> list[TraceNode]:
    """Rows `sn, cpu_milli, memory_mib, gpu, model`. Raises ValidationError naming the line."""
    out = []
    for line, row in _rows(lines, ("sn", "cpu_milli", "memory_mib", "gpu", "model"), source):
        out.append(
            TraceNode(
                name=row["sn"],
                milli_cpu=_int(row, "cpu_milli", source, line),
                memory_mib=_int(row, "memory_mib", source, line),
                gpus=_int(row, "gpu", source, line),
                model=(row.get("model") or "").strip(),
            )
        )
    return out


def parse_pods(lines: Iterable[str], *, source: str = "pods") -> list[TracePod]:
    """Rows `name, cpu_milli, memory_mib, num_gpu, gpu_milli[, gpu_spec, …]`."""
    out = []
    for line, row in _rows(lines, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"), source):
        spec = (row.get("gpu_spec") or "").strip()
        out.append(
            TracePod(
                name=row["name"],
                milli_cpu=_int(row, "cpu_milli", source, line),
                memory_mib=_int(row, "memory_mib", source, line),
                num_gpu=_int(row, "num_gpu", source, line),
                gpu_milli=_int(row, "gpu_milli", source, line),
                gpu_spec=tuple(s for s in spec.split("|") if s),
            )
        )
    return out


def workload(pods: Iterable[TracePod]) -> tuple[tuple[fragmentation.TaskShape, int], ...]:
    """The trace's own mix of task shapes, each weighted by how many of its pods have it: the
    target workload FGD's evaluation measures fragmentation against (shapes as the scheduler
    reads them from the pods `to_pod` makes, so the units agree)."""
    return fragmentation.workload_of(PodInfo.of(p.to_pod()) for p in pods)
