"""A scheduler, or its cluster cache, over nodes from `tests.support.builders`.

scheduler = make_scheduler(make_node("a"), make_node("b"))
scheduler.schedule_one(make_pod("p", gpu_core=50))
"""

from __future__ import annotations

import dataclasses

from apis.crds.device import Device
from apis.k8s.core import Node
from scheduler.cache import ClusterCache
from scheduler.core import Scheduler
from scheduler.framework.config import SchedulerConfig

__all__ = ["make_cache", "make_scheduler", "mark_terminating", "state_of"]


def make_cache(*nodes: tuple[Node, Device]) -> ClusterCache:
    cache = ClusterCache()
    for node, device in nodes:
        cache.add_node(node)
        cache.add_device(device)
    return cache


def make_scheduler(*nodes: tuple[Node, Device], config: SchedulerConfig | None = None, seed: int = 0) -> Scheduler:
    scheduler = Scheduler(config, seed=seed)
    for node, device in nodes:
        scheduler.cache.add_node(node)
        scheduler.cache.add_device(device)
    return scheduler


def mark_terminating(scheduler: Scheduler, key: str) -> None:
    """The pod `key` in the scheduler's cache, now being deleted (a deletionTimestamp set)."""
    pod = next(p for p in scheduler.cache.pods() if p.key == key).pod
    meta = dataclasses.replace(pod.meta, deletion_timestamp="2026-01-01T00:00:00Z")
    scheduler.cache.add_pod(dataclasses.replace(pod, meta=meta))


def state_of(cache: ClusterCache) -> object:
    """What the cache holds per node (requests, pods, device usage), comparable with `==`."""
    return {
        info.name: (
            dict(info.requested),
            list(info.non_zero_requested),
            sorted(info.pods),
            cache.device_usage(info.name),
        )
        for info in cache.nodes()
    }
