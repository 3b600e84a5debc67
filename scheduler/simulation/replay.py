"""Replay the Alibaba GPU trace by its published protocol, through the scheduler's own core.

The protocol (the trace README, from the FGD paper, USENIX ATC'23): for each seed, shuffle the
pods, top them up by resampling until the GPU demand reaches 130% of the cluster's GPUs, try
each pod once in that order (a pod that fits nowhere is dropped; nothing is deleted, retried or
preempted). After every pod record arrived GPU demand (every pod tried so far, failed ones
included) and allocated GPU demand, both in thousandths of a GPU; with
x = round(100 × arrived / capacity), alloc(x) is the mean of 100 × allocated / capacity over
the pods at x, and the headline figure is the unallocated share at x = 100: 100 − alloc(100).

Every pod goes through `Scheduler.schedule_one` with every plugin of the profile (node fit,
affinity for `gpu_spec`, DeviceShare), so what is measured is what the live scheduler does.

`claims_fraction` asks for the GPUs of about that share of the GPU pods through ResourceClaims
instead (Dynamic Resource Allocation, `bench.with_claims`: a share of one GPU as `cores` and
`memory` of one shareable device, whole GPUs as a device count), every node's GPUs published
as a ResourceSlice (`apis.dra.gpus.gpu_slice`): the same trace packed by the DynamicResources
plugin instead of DeviceShare. A claim's memory is its percent of the cluster's smallest GPU, so
on any GPU it takes no larger a share of the memory than of the cores (the Koordinator pod asks
the same percent of both): the cores decide, as for the Koordinator pod. Which pods ask through
claims depends on the seed only.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from apis.crds.device import DeviceType
from apis.dra import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES, gpus
from apis.errors import ValidationError
from apis.extension import names
from apis.k8s.core import Pod
from scheduler.core import Scheduler
from scheduler.framework.config import SchedulerConfig
from scheduler.simulation.bench import GPU_CLASS, with_claims
from scheduler.simulation.trace import TraceNode, TracePod

__all__ = ["CURVE_RANGE", "SeedResult", "Summary", "replay", "summarize"]

#: x values reported in the curve.
CURVE_RANGE = range(50, 131)
TOP_UP = 1.3


@dataclass(frozen=True, slots=True)
class SeedResult:
    seed: int
    #: x -> alloc(x), percent of cluster GPU allocated, for every x that occurred
    alloc: Mapping[int, float]
    pods_tried: int
    pods_scheduled: int
    #: pods that asked for their GPUs through ResourceClaims
    claim_pods: int = 0

    def unallocated(self, x: int) -> float | None:
        value = self.alloc.get(x)
        return None if value is None else 100.0 - value


@dataclass(frozen=True, slots=True)
class Summary:
    #: (mean, sd over seeds) of the unallocated GPU % at x = 100
    unallocated_at_100: tuple[float, float]
    #: x -> mean over seeds of the unallocated GPU %
    curve: Mapping[int, float] = field(default_factory=dict)
    seeds: tuple[int, ...] = ()


def workload(pods: Sequence[TracePod], capacity_milli: int, seed: int) -> list[TracePod]:
    """The seed's pod order: the trace shuffled, then resampled until demand is 130% of capacity."""
    rng = random.Random(seed)
    order = list(pods)
    rng.shuffle(order)
    demand = sum(p.gpu_milli_total for p in order)
    target = TOP_UP * capacity_milli
    if any(p.gpu_milli_total for p in pods):
        while demand < target:
            extra = rng.choice(pods)
            order.append(extra)
            demand += extra.gpu_milli_total
    return order


def replay(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    *,
    seed: int,
    config: SchedulerConfig,
    pending: int = 0,
    progress: Callable[[int, int], None] | None = None,
    claims_fraction: float = 0.0,
) -> SeedResult:
    """One seed of the protocol on a fresh cluster (about `claims_fraction` of the GPU pods
    asking through ResourceClaims). `pending`: the first that many pods of the order are told to
    the scheduler before the first is scheduled, as a backlog waiting when a fresh scheduler
    starts (a learned workload counts them at once). `progress(done, total)` is called now and
    then."""
    scheduler = Scheduler(config, seed=seed)
    gpu_memory: list[int] = []
    for trace_node in nodes:
        node, device = trace_node.to_objects()
        scheduler.cache.add_node(node)
        scheduler.cache.add_device(device)
        if claims_fraction > 0:
            scheduler.feeds.deliver(RESOURCE_SLICES, gpus.gpu_slice(device))
            gpu_memory += [d.resources.get(names.GPU_MEMORY, 0) for d in device.devices if d.type is DeviceType.GPU]
    capacity = sum(n.gpus for n in nodes) * 1000
    if capacity == 0:
        raise ValidationError("nodes", "the trace's nodes have no GPUs: nothing to measure")
    order = workload(pods, capacity, seed)
    as_pods: list[Pod] = [p.to_pod(f"{p.name}-{i}") for i, p in enumerate(order)]
    claim_pods = 0
    if claims_fraction > 0:
        scheduler.feeds.deliver(DEVICE_CLASSES, GPU_CLASS)
        as_pods, claims = with_claims(as_pods, fraction=claims_fraction, seed=seed, gpu_memory=min(gpu_memory))
        for claim in claims:
            scheduler.feeds.deliver(RESOURCE_CLAIMS, claim)
        claim_pods = len(claims)
    for pod in as_pods[:pending]:
        scheduler.observe_pod(pod)
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    arrived = allocated = scheduled = 0
    for i, (trace_pod, pod) in enumerate(zip(order, as_pods, strict=True)):
        outcome = scheduler.schedule_one(pod, diagnose=False)
        arrived += trace_pod.gpu_milli_total
        if outcome.scheduled:
            allocated += trace_pod.gpu_milli_total
            scheduled += 1
        x = math.floor(100 * arrived / capacity + 0.5)  # round half up, as the paper's Go code
        sums[x] = sums.get(x, 0.0) + 100 * allocated / capacity
        counts[x] = counts.get(x, 0) + 1
        if progress is not None and i % 256 == 0:
            progress(i, len(order))
    if progress is not None:
        progress(len(order), len(order))
    return SeedResult(seed, {x: sums[x] / counts[x] for x in sorted(sums)}, len(order), scheduled, claim_pods)


def summarize(results: Sequence[SeedResult]) -> Summary:
    """Mean and sample standard deviation over seeds of the unallocated GPU % at x = 100."""
    at_100 = [u for r in results if (u := r.unallocated(100)) is not None]
    mean = statistics.fmean(at_100) if at_100 else math.nan
    sd = statistics.stdev(at_100) if len(at_100) > 1 else 0.0
    curve = {}
    for x in CURVE_RANGE:
        values = [u for r in results if (u := r.unallocated(x)) is not None]
        if values:
            curve[x] = statistics.fmean(values)
    return Summary((mean, sd), curve, tuple(r.seed for r in results))
