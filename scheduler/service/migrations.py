"""Defragmentation plans from the live scheduler: the planner on a copy of the cache, now.

The gRPC `PlanMigrations` asks this: which bound pods to move, and where, so that a pending pod
(named, or given as JSON) fits. A `CacheSnapshot` is taken under the lock (references only: a
cycle waits milliseconds), restored into a cache of its own, and the planner runs on that with
the scheduler's own configuration and plugins, outside the lock: the live cache is never
touched and nothing is reserved. The descheduler acts
on the plan (PodMigrationJobs); the scheduler itself moves nothing.

Quotas are not consulted on the copy: a migrating pod's quota use is the same before and after
(what the descheduler reserves is the pod's replacement), and a gang's pending member is refused
by the planner (gangs are placed all together, not made room for one member at a time).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from apis.errors import TesseraError
from apis.k8s.core import Pod
from scheduler.cache import CacheSnapshot, ClusterCache
from scheduler.core import Scheduler
from scheduler.defrag import MigrationPlan, PlanOptions, plan
from scheduler.framework.config import PluginRef, SchedulerConfig
from scheduler.framework.runtime import Registry
from scheduler.service.metrics import SchedulerMetrics

__all__ = ["MigrationPlanner", "NotPendingError", "PodLookup", "UnknownPodError"]

log = logging.getLogger(__name__)

#: Looks a pod up by namespace and name (None when unknown), as `inspector.PodLookup`.
PodLookup = Callable[[str, str], Pod | None]


class UnknownPodError(TesseraError):
    """No pod of that name exists."""


class NotPendingError(TesseraError):
    """The pod is bound or finished: there is nothing to make room for."""


class MigrationPlanner:
    def __init__(
        self,
        *,
        lock: threading.RLock,
        cache: ClusterCache,
        config: SchedulerConfig,
        registry: Registry,
        default_plugins: tuple[PluginRef, ...],
        lookup: PodLookup,
        fetch: PodLookup,
        metrics: SchedulerMetrics | None = None,
        seed: int = 0,
    ) -> None:
        self._lock = lock
        self._cache = cache
        self._config = config
        self._registry = registry
        self._default_plugins = default_plugins
        self._lookup = lookup
        self._fetch = fetch
        self._seed = seed
        self._metrics = metrics

    def pending_pod(self, namespace: str, name: str) -> Pod:
        """The named pod, which must be pending. Raises UnknownPodError, NotPendingError,
        kube.APIError when the API server cannot be asked, TesseraError when the pod cannot be
        parsed."""
        key = f"{namespace}/{name}"
        pod = self._lookup(namespace, name) or self._fetch(namespace, name)
        if pod is None:
            raise UnknownPodError(f"pod {key} does not exist")
        if pod.is_terminal:
            raise NotPendingError(f"pod {key} has finished (phase {pod.phase}): nothing to make room for")
        if pod.node_name:
            raise NotPendingError(f"pod {key} is bound to {pod.node_name}: nothing to make room for")
        return pod

    def plan(self, pod: Pod, options: PlanOptions) -> MigrationPlan:
        """The planner's answer for `pod` against the cluster as the scheduler sees it now.
        Raises ConfigError for bad options."""
        options.validate()
        with self._lock:
            snapshot = CacheSnapshot.of(self._cache)
        scheduler = Scheduler(
            self._config,
            cache=snapshot.restore(),
            registry=self._registry,
            default_plugins=self._default_plugins,
            seed=self._seed,
        )
        result = plan(scheduler, pod, options)
        if self._metrics is not None:
            outcome = "infeasible" if not result.feasible else "planned" if result.migrations else "fits"
            self._metrics.migration_plan(outcome, result.seconds)
        log.log(
            logging.INFO - 2,
            "Planned migrations",
            extra={
                "pod": pod.key,
                "feasible": result.feasible,
                "node": result.node or "",
                "moves": len(result.migrations),
                "seconds": round(result.seconds, 4),
            },
        )
        return result
