"""Defragmentation on the Alibaba trace: static fill to x = 100, then one defragmentation pass.

The fill follows the replay's protocol (`replay.workload`: the seed's shuffled, topped-up
order, each pod tried once, failures dropped) and stops once arrived GPU demand reaches the
cluster's capacity (x = 100). Every trace pod is taken as controlled (the trace's tasks are
recreated by their job framework, so the planner may move them); what the pass adds has no
controller and never moves.

A pass, from the filled cluster, for one whole-GPU shape (8 GPUs, then 4: the trace's most
common CPU and memory for that GPU count): repeatedly plan room for one more pod of the shape
with the planner (`scheduler.defrag.plan`, the code the live scheduler serves), place the pod
once the plan is done, until no plan is found or the budget of migrations is spent. Each shape
starts from the same filled cluster (a copy). Measured: unallocated GPU % before and after, pods
placed without moving anything and thanks to migrations, the migrations, time per plan.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from apis.crds.device import DeviceType
from apis.errors import ValidationError
from apis.extension import names
from apis.k8s.core import Pod
from apis.k8s.meta import OwnerReference
from scheduler.cache import CacheSnapshot, ClusterCache
from scheduler.core import Scheduler
from scheduler.defrag import PlanOptions, plan
from scheduler.framework.config import SchedulerConfig
from scheduler.simulation.replay import workload
from scheduler.simulation.trace import TraceNode, TracePod

__all__ = ["DefragSeed", "PassResult", "fill", "run_defrag", "shape_of", "unallocated_pct"]

#: Owner of every trace pod: its job framework, which recreates what is evicted.
_TRACE_OWNER = OwnerReference("batch.openpai/v1", "Job", "trace", "trace-job", controller=True)


@dataclass(frozen=True, slots=True)
class PassResult:
    """One defragmentation pass for one shape."""

    gpus: int
    #: Pods of the shape placed with no migration (room was there), and thanks to migrations.
    placed_free: int
    placed_moved: int
    migrations: int
    unallocated_after: float
    plan_seconds: tuple[float, ...]
    #: Why the pass stopped (the last plan's message, or the budget).
    stop: str

    def to_dict(self) -> dict[str, object]:
        seconds = self.plan_seconds
        return {
            "gpus": self.gpus,
            "placed_free": self.placed_free,
            "placed_moved": self.placed_moved,
            "migrations": self.migrations,
            "unallocated_gpu_pct_after": round(self.unallocated_after, 3),
            "plans": len(seconds),
            "plan_ms_mean": round(1000 * statistics.fmean(seconds), 1) if seconds else 0.0,
            "plan_ms_max": round(1000 * max(seconds), 1) if seconds else 0.0,
            "stop": self.stop,
        }


@dataclass(frozen=True, slots=True)
class DefragSeed:
    seed: int
    pods_tried: int
    pods_scheduled: int
    unallocated_before: float
    passes: tuple[PassResult, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "seed": self.seed,
            "pods_tried": self.pods_tried,
            "pods_scheduled": self.pods_scheduled,
            "unallocated_gpu_pct_before": round(self.unallocated_before, 3),
            "passes": [p.to_dict() for p in self.passes],
        }


def shape_of(pods: Sequence[TracePod], gpus: int) -> TracePod | None:
    """The trace's most common pod asking for `gpus` whole GPUs (by CPU and memory; any GPU
    model), or None when it has none."""
    found = collections.Counter((p.milli_cpu, p.memory_mib) for p in pods if p.num_gpu == gpus and p.gpu_milli >= 1000)
    if not found:
        return None
    (cpu, memory), _ = max(found.items(), key=lambda kv: (kv[1], kv[0]))
    return TracePod(f"defrag-{gpus}gpu", cpu, memory, gpus, 1000)


def unallocated_pct(cache: ClusterCache, capacity_gpus: int) -> float:
    """100 − the percent of the cluster's GPUs that pods hold (shares counted as such)."""
    held = sum(
        a.resources.get(names.GPU_CORE, 0)
        for info in cache.nodes()
        for holding in info.devices.holdings.values()
        for a in holding.allocations.get(DeviceType.GPU, ())
    )
    return 100.0 - held / capacity_gpus


def fill(
    nodes: Sequence[TraceNode], pods: Sequence[TracePod], *, seed: int, config: SchedulerConfig, load: int = 100
) -> tuple[Scheduler, int, int]:
    """The cluster after the static fill to x = `load` (arrived GPU demand, percent of the
    cluster's GPUs); (scheduler, pods tried, pods scheduled)."""
    scheduler = Scheduler(config, seed=seed)
    for trace_node in nodes:
        node, device = trace_node.to_objects()
        scheduler.cache.add_node(node)
        scheduler.cache.add_device(device)
    capacity = sum(n.gpus for n in nodes) * 1000
    if capacity == 0:
        raise ValidationError("nodes", "the trace's nodes have no GPUs: nothing to measure")
    arrived = tried = scheduled = 0
    for i, trace_pod in enumerate(workload(pods, capacity, seed)):
        if 100 * arrived >= load * capacity:
            break
        pod = trace_pod.to_pod(f"{trace_pod.name}-{i}")
        pod = dataclasses.replace(pod, meta=dataclasses.replace(pod.meta, owner_references=(_TRACE_OWNER,)))
        scheduled += scheduler.schedule_one(pod, diagnose=False).scheduled
        arrived += trace_pod.gpu_milli_total
        tried += 1
    return scheduler, tried, scheduled


def defrag_pass(
    scheduler: Scheduler,
    shape: TracePod,
    *,
    capacity_gpus: int,
    budget: int,
    max_migrations: int,
    clock: Callable[[], float] = time.perf_counter,
) -> PassResult:
    """Place pods of `shape`, planning room for each, until no plan or the budget is spent."""
    placed_free = placed_moved = migrations = 0
    seconds: list[float] = []
    stop = ""
    for i in itertools.count():
        left = budget - migrations
        options = PlanOptions(max_migrations=max(1, min(max_migrations, left)))
        pod: Pod = shape.to_pod(f"{shape.name}-{i}", namespace="defrag")
        start = clock()
        result = plan(scheduler, pod, options)
        seconds.append(clock() - start)
        if not result.feasible:
            stop = result.message
            if left < max_migrations:
                stop = f"{left} of the budget of {budget} migrations left: {stop}"
            break
        if len(result.migrations) > left:
            stop = f"the budget of {budget} migrations is spent"
            break
        outcome = scheduler.schedule_one(pod, diagnose=False)
        if not outcome.scheduled:
            stop = f"pod {pod.key} did not fit after its plan: {outcome.status.message}"
            break
        migrations += len(result.migrations)
        if result.migrations:
            placed_moved += 1
        else:
            placed_free += 1
    return PassResult(
        shape.num_gpu,
        placed_free,
        placed_moved,
        migrations,
        unallocated_pct(scheduler.cache, capacity_gpus),
        tuple(seconds),
        stop,
    )


def run_defrag(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    *,
    seed: int,
    config: SchedulerConfig,
    shapes: Sequence[int] = (8, 4),
    budget: int = 200,
    max_migrations: int = 8,
    load: int = 100,
) -> DefragSeed:
    """Fill once (to x = `load`), then one pass per shape from a copy of the filled cluster."""
    filled, tried, scheduled = fill(nodes, pods, seed=seed, config=config, load=load)
    capacity_gpus = sum(n.gpus for n in nodes)
    passes = []
    for gpus in shapes:
        shape = shape_of(pods, gpus)
        if shape is None:
            continue
        working = Scheduler(config, cache=CacheSnapshot.of(filled.cache).restore(), seed=seed)
        passes.append(
            defrag_pass(
                working,
                shape,
                capacity_gpus=capacity_gpus,
                budget=budget,
                max_migrations=max_migrations,
            )
        )
    return DefragSeed(seed, tried, scheduled, unallocated_pct(filled.cache, capacity_gpus), tuple(passes))
