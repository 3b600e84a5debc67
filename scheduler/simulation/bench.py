"""The scheduler benchmark: a synthetic GPU cluster and the trace's request mix, timed per cycle.

Nodes are `cluster.gpu_node` servers (2 NUMA nodes × 2 PCIe switches, an RDMA NIC with VFs per
switch). Pods follow the Alibaba trace's most common shapes, weighted by frequency (a share of
one GPU, whole GPUs, CPU only); multi-GPU pods also ask for one RDMA virtual function per PCIe
switch of their GPUs (`device-joint-allocate` SamePCIe), as distributed training does. Each pod
runs the whole cycle (`Scheduler.schedule_one`: filter, score, reserve, annotate, bind) and its
latency is measured with the injected clock; nothing is excluded as warm-up.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from apis.crds.device import DeviceType
from apis.crds.elasticquota import ElasticQuota
from apis.dra import gpus as dra_gpus
from apis.dra.claim import DeviceClass, ResourceClaim
from apis.extension import hints, names
from apis.k8s import labels
from apis.k8s.core import Container, Pod, PodResourceClaim
from apis.k8s.meta import ObjectMeta
from scheduler.core import Scheduler
from scheduler.framework.config import SchedulerConfig
from scheduler.simulation.cluster import NodeShape, gpu_node
from scheduler.simulation.trace import TracePod

__all__ = [
    "GPU_CLASS",
    "TRACE_SHAPES",
    "BenchResult",
    "run_bench",
    "synthetic_pods",
    "with_claims",
    "with_gangs",
    "with_quota_per_namespace",
]

#: (milli-CPU, memory MiB, GPUs, GPU milli, frequency): the default trace's 30 most common
#: shapes plus every multi-GPU shape (87% of its pods).
TRACE_SHAPES: tuple[tuple[int, int, int, int, int], ...] = (
    (3152, 5600, 1, 810, 1047),
    (11300, 49152, 1, 1000, 857),
    (11400, 48128, 1, 1000, 534),
    (3152, 5600, 1, 1000, 470),
    (11908, 47104, 1, 470, 388),
    (12500, 57344, 0, 0, 364),
    (8000, 30517, 1, 470, 360),
    (32000, 49152, 0, 0, 284),
    (18708, 64512, 1, 1000, 255),
    (11908, 47104, 1, 650, 237),
    (9810, 41560, 1, 1000, 195),
    (8000, 30517, 0, 0, 163),
    (12000, 24576, 1, 1000, 158),
    (15700, 58368, 1, 1000, 158),
    (11908, 47104, 1, 1000, 153),
    (15400, 51200, 0, 0, 120),
    (4000, 22888, 1, 320, 111),
    (16000, 32768, 1, 1000, 108),
    (8000, 16384, 1, 1000, 104),
    (4000, 24576, 1, 1000, 104),
    (12000, 16384, 1, 1000, 99),
    (16500, 51200, 0, 0, 95),
    (14200, 58368, 1, 1000, 93),
    (4000, 30517, 1, 230, 84),
    (24200, 93184, 1, 1000, 84),
    (4000, 15258, 1, 320, 78),
    (3152, 5600, 1, 590, 75),
    (4152, 10600, 1, 550, 72),
    (8000, 30517, 1, 320, 72),
    (11400, 77824, 1, 1000, 65),
    (64200, 263168, 8, 1000, 18),
    (88000, 327680, 8, 1000, 18),
    (32200, 132096, 4, 1000, 9),
    (16200, 66560, 2, 1000, 7),
    (6000, 65536, 2, 1000, 3),
    (64000, 262144, 8, 1000, 3),
    (120000, 737280, 8, 1000, 3),
    (60200, 320512, 4, 1000, 3),
    (32000, 131072, 4, 1000, 3),
    (30200, 160768, 2, 1000, 3),
    (120200, 640000, 8, 1000, 2),
    (17400, 43008, 2, 1000, 2),
    (14000, 60000, 2, 1000, 1),
)

_JOINT = hints.encode_joint_allocate(hints.JointAllocate((DeviceType.GPU, DeviceType.RDMA), hints.JointScope.SAME_PCIE))
_RDMA_HINT = hints.encode_hints(
    {DeviceType.RDMA: hints.DeviceHint(vf_selector=labels.LabelSelector({"type": "general"}))}
)


@dataclass(frozen=True, slots=True)
class BenchResult:
    nodes: int
    gpus_per_node: int
    pods: int
    scheduled: int
    seconds: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    setup_seconds: float

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "pods": self.pods,
            "scheduled": self.scheduled,
            "pods_per_second": round(self.pods_per_second, 1),
            "p50_ms": round(self.p50_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
            "max_ms": round(self.max_ms, 3),
            "wall_seconds": round(self.seconds, 3),
            "setup_seconds": round(self.setup_seconds, 3),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def synthetic_pods(count: int, *, seed: int) -> list[Pod]:
    """`count` pending pods drawn from TRACE_SHAPES; multi-GPU ones also ask for RDMA jointly."""
    rng = random.Random(seed)
    weights = [shape[4] for shape in TRACE_SHAPES]
    out = []
    for i, (cpu, memory, gpus, gpu_milli, _) in enumerate(rng.choices(TRACE_SHAPES, weights, k=count)):
        pod = TracePod(f"bench-{i}", cpu, memory, gpus, gpu_milli).to_pod(namespace="bench")
        if gpus > 1:
            container = pod.containers[0]
            requests = {**container.requests, names.RDMA: 1}
            annotations = {
                names.ANNOTATION_DEVICE_JOINT_ALLOCATE: _JOINT,
                names.ANNOTATION_DEVICE_ALLOCATE_HINT: _RDMA_HINT,
            }
            pod = Pod(
                meta=ObjectMeta(name=pod.name, namespace=pod.namespace, uid=pod.uid, annotations=annotations),
                scheduler_name=pod.scheduler_name,
                containers=(Container(container.name, requests=requests, limits=requests),),
            )
        out.append(pod)
    return out


def with_gangs(pods: list[Pod], *, fraction: float, sizes: tuple[int, int], seed: int) -> list[Pod]:
    """`pods` with about `fraction` of them turned into Strict gangs of `sizes[0]`..`sizes[1]`
    members (each member the shape of the gang's first pod, min = the gang's size), the members
    of a gang one after another where its first pod was."""
    rng = random.Random(seed)
    out: list[Pod] = []
    budget = round(len(pods) * fraction)
    i = 0
    while i < len(pods):
        chance = budget / max(1, len(pods) - i)
        if budget >= sizes[0] and rng.random() < chance / ((sizes[0] + sizes[1]) / 2):
            size = min(rng.randint(*sizes), budget, len(pods) - i)
            first = pods[i]
            gang = {names.ANNOTATION_GANG_NAME: f"gang-{i}", names.ANNOTATION_GANG_MIN_AVAILABLE: str(size)}
            for k in range(size):
                meta = ObjectMeta(
                    name=f"{first.name}-m{k}",
                    namespace=first.namespace,
                    uid=f"{first.uid}-m{k}",
                    annotations={**first.annotations, **gang},
                )
                out.append(Pod(meta=meta, scheduler_name=first.scheduler_name, containers=first.containers))
            budget -= size
            i += size
        else:
            out.append(pods[i])
            i += 1
    return out


def run_bench(
    *,
    nodes: int,
    gpus_per_node: int,
    pods: int,
    seed: int = 1,
    config: SchedulerConfig | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> BenchResult:
    """Build the cluster, then schedule `pods` pods one by one, timing each whole cycle."""
    setup_start = clock()
    scheduler = Scheduler(config, seed=seed)
    shape = NodeShape(gpus=gpus_per_node)
    for i in range(nodes):
        node, device = gpu_node(f"node-{i:05d}", shape)
        scheduler.cache.add_node(node)
        scheduler.cache.add_device(device)
    workload = synthetic_pods(pods, seed=seed)
    setup = clock() - setup_start
    latencies = []
    scheduled = 0
    start = clock()
    for pod in workload:
        before = clock()
        outcome = scheduler.schedule_one(pod)
        latencies.append(clock() - before)
        scheduled += outcome.scheduled
    seconds = clock() - start
    latencies.sort()

    def percentile(q: float) -> float:
        return latencies[min(int(len(latencies) * q), len(latencies) - 1)] * 1000 if latencies else 0.0

    return BenchResult(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        pods=pods,
        scheduled=scheduled,
        seconds=seconds,
        p50_ms=percentile(0.5),
        p99_ms=percentile(0.99),
        max_ms=latencies[-1] * 1000 if latencies else 0.0,
        setup_seconds=setup,
    )


def with_quota_per_namespace(
    pods: list[Pod], *, quotas: int, cluster: dict[str, int]
) -> tuple[list[Pod], list[ElasticQuota]]:
    """`pods` spread round robin over `quotas` namespaces (`team-0`, `team-1`, …), and an
    ElasticQuota per namespace limiting cpu, memory and gpu-core: min an equal share of
    `cluster` (what the nodes have, in base units), max all of it, so quotas share by demand
    as in a busy cluster while admitting about what fits anyway."""
    limited = (names.CPU, names.MEMORY, names.GPU_CORE)
    out = []
    for i, pod in enumerate(pods):
        namespace = f"team-{i % quotas}"
        meta = dataclasses.replace(pod.meta, namespace=namespace, uid=f"{namespace}-{pod.uid}")
        out.append(dataclasses.replace(pod, meta=meta))
    objects = [
        ElasticQuota.from_dict(
            {
                "metadata": {"name": f"team-{q}", "namespace": f"team-{q}"},
                "spec": {
                    "min": {r: str(cluster.get(r, 0) // quotas) for r in limited},
                    "max": {r: str(cluster.get(r, 0)) for r in limited},
                },
            }
        )
        for q in range(quotas)
    ]
    return out, objects


#: The DeviceClass the benchmark's claims name: Tessera's GPU driver, healthy GPUs with memory,
#: selected in CEL as a cluster's class would.
GPU_CLASS = DeviceClass.from_dict(
    {
        "metadata": {"name": "gpu.tessera.dev"},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f'device.driver == "{dra_gpus.DRIVER}" && '
                        f'device.capacity["{dra_gpus.DRIVER}"].memory.compareTo(quantity("1Gi")) >= 0'
                    }
                }
            ]
        },
    }
)


def with_claims(
    pods: list[Pod], *, fraction: float, seed: int, gpu_memory: int
) -> tuple[list[Pod], list[ResourceClaim]]:
    """`pods` with about `fraction` of the GPU pods asking for the same GPUs through a
    ResourceClaim instead (DRA), and those claims: a share of one GPU as a request for `cores`
    and `memory` (its ratio of a GPU of `gpu_memory` bytes) of one shareable GPU, whole GPUs as
    `count` devices; each request also selects in CEL (`minor` an int: every GPU of ours). The
    pod keeps its CPU and memory; its RDMA and joint-allocation hints go (a DRA pod asks for
    its devices in its claims)."""
    rng = random.Random(seed)
    out: list[Pod] = []
    claims: list[ResourceClaim] = []
    for pod in pods:
        container = pod.containers[0]
        requests = dict(container.requests)
        whole = requests.pop(names.NVIDIA_GPU, 0)
        percent = requests.pop(names.GPU_CORE, 0)
        requests.pop(names.GPU_MEMORY_RATIO, None)
        shared = requests.pop(names.GPU_SHARED, 0)
        if not (whole or percent) or shared > 1 or rng.random() >= fraction:
            out.append(pod)
            continue
        requests.pop(names.RDMA, None)
        exactly: dict[str, object] = {
            "deviceClassName": GPU_CLASS.name,
            "count": whole or 1,
            "selectors": [{"cel": {"expression": f'has(device.attributes["{dra_gpus.DRIVER}"].{dra_gpus.MINOR})'}}],
        }
        if percent:
            memory = gpu_memory * percent // 100
            exactly["capacity"] = {"requests": {dra_gpus.CORES: str(percent), dra_gpus.MEMORY: str(memory)}}
        name = f"{pod.name}-gpu"
        claims.append(
            ResourceClaim.from_dict(
                {
                    "metadata": {"name": name, "namespace": pod.namespace, "uid": f"{pod.uid}-gpu"},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
                }
            )
        )
        out.append(
            dataclasses.replace(
                pod,
                meta=dataclasses.replace(pod.meta, annotations={}),
                containers=(Container(container.name, requests=requests, limits=dict(requests)),),
                resource_claims=(PodResourceClaim("gpu", resource_claim_name=name),),
            )
        )
    return out, claims
