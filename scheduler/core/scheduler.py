"""The offline scheduler: one pod in, one placement out, bound in memory.

`Scheduler` builds a Framework per profile from a SchedulerConfig and the plugin registry and
runs the `SchedulingCycle` with in-memory binding: PreBind, Bind plugins, then the pod added back
to the cache on its node with the annotations PreBind asked for, then PostBind. PreBind's writes
of other objects are kept on the outcome (`Outcome.writes`): nothing is written. `tessera what-if`,
`tessera simulate` and `tessera bench scheduler` drive it directly; the live scheduler service
runs the same cycle but binds through the API server, asynchronously.

Deterministic: one seeded RNG breaks score ties, and time comes from an injected clock (only
Permit deadlines use it). Pods held at Permit stay held until the caller calls
`resolve_waiting`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from apis.crds.podgroup import PodGroup
from apis.crds.reservation import Reservation, pre_allocated_from
from apis.extension import names
from apis.k8s.core import Pod
from apis.k8s.meta import ObjectMeta
from kube.quotas import QuotaManager
from scheduler.cache import ClusterCache
from scheduler.core import reservations
from scheduler.core.cycle import Attempt, Placement, SchedulingCycle, pre_bind
from scheduler.core.frameworks import build_frameworks
from scheduler.framework.config import PluginRef, SchedulerConfig
from scheduler.framework.diagnosis import Diagnosis
from scheduler.framework.feeds import Feeds
from scheduler.framework.preemption import Preemption
from scheduler.framework.runtime import Framework, Registry
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.framework.writes import ObjectWrite, Writes
from scheduler.plugins import DEFAULT_PLUGINS, REGISTRY
from scheduler.plugins.elasticquota import QUOTA_MANAGER

__all__ = ["Outcome", "Scheduler"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one pod. `status` is SUCCESS (bound), WAIT (held at Permit) or why not."""

    pod: str
    node: str | None
    status: Status
    #: Annotations PreBind asked for (e.g. `scheduling.koordinator.sh/device-allocated`).
    annotations: Mapping[str, str] = field(default_factory=dict)
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    #: No node fits, but PostFilter would evict these pods so it does (nothing is evicted here).
    preemption: Preemption | None = None
    #: Everything PreBind asked to write (other objects too), for callers that act on them.
    writes: Writes = field(default_factory=Writes)

    @property
    def scheduled(self) -> bool:
        return self.status.is_success and self.node is not None

    @classmethod
    def of(cls, attempt: Attempt[None]) -> Outcome:
        held = attempt.placement
        if held is None:
            preemption = attempt.preemption
            return cls(attempt.pod.key, None, attempt.status, diagnosis=attempt.diagnosis, preemption=preemption)
        return cls(
            attempt.pod.key, held.node, attempt.status, dict(held.annotations), attempt.diagnosis, writes=held.writes
        )


class Scheduler:
    """Frameworks per profile over one cache; `schedule_one` runs a whole cycle synchronously."""

    def __init__(
        self,
        config: SchedulerConfig | None = None,
        *,
        cache: ClusterCache | None = None,
        registry: Registry = REGISTRY,
        default_plugins: tuple[PluginRef, ...] = DEFAULT_PLUGINS,
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Raises ConfigError when a profile or plugin argument is invalid."""
        self.config = config if config is not None else SchedulerConfig()
        self.cache = cache if cache is not None else ClusterCache()
        #: Quotas and pods for the ElasticQuota plugin (what-if feeds it from the snapshot).
        self.quotas = QuotaManager()
        #: What the plugins watch (`observe_pod_group` hands them PodGroups); nothing is opened.
        self.feeds = Feeds()
        self.frameworks = build_frameworks(
            self.config,
            self.cache,
            registry=registry,
            default_plugins=default_plugins,
            seed=seed,
            shared={QUOTA_MANAGER: self.quotas},
            feeds=self.feeds,
        )
        self._default = self.frameworks[self.config.profiles[0].scheduler_name]
        self.cycle: SchedulingCycle[None] = SchedulingCycle(self.cache, self.frameworks, bind=self._commit, clock=clock)

    def framework_for(self, pod: Pod) -> Framework | None:
        """The profile named by the pod's schedulerName, or None when it is not ours."""
        return self.frameworks.get(pod.scheduler_name)

    def schedule_one(self, pod: Pod, *, profile: str | None = None, diagnose: bool = True) -> Outcome:
        """Schedule and bind one pending pod. Never raises for a pod that does not fit.

        The profile is `profile`, else the pod's schedulerName, else the first profile (the
        simulator schedules pods written for other schedulers too; what-if asks
        `framework_for` first and leaves those alone, as the live scheduler does).
        """
        framework = self.frameworks[profile] if profile else self.framework_for(pod) or self._default
        attempt = self.cycle.schedule_one(pod, framework, None, diagnose=diagnose)
        if attempt is None:
            # Scheduling it again would count it twice (a snapshot listing the same pod twice).
            return Outcome(pod.key, None, Status.error(f"pod {pod.key} is already scheduled or running"))
        return Outcome.of(attempt)

    def place_reservation(self, reservation: Reservation, *, now: str) -> tuple[Outcome, Reservation]:
        """Schedule a pending Reservation as its reserve pod; placed, it is Available and holds
        its node's resources for its owners from now on. Returns the outcome and the Reservation
        with the status the live scheduler would write (`scheduler.core.reservations`)."""
        self.cache.add_reservation(reservation)  # known: its reserve pod is nobody's owner
        outcome = self.schedule_one(reservation.reserve_pod())
        if not outcome.scheduled or outcome.node is None:
            return outcome, reservations.unschedulable(reservation, message=outcome.status.message, now=now)
        meta = dataclasses.replace(
            reservation.meta, annotations={**reservation.meta.annotations, **outcome.annotations}
        )
        placed = reservations.placed(dataclasses.replace(reservation, meta=meta), node=outcome.node, now=now)
        placed = dataclasses.replace(placed, pre_allocated=pre_allocated_from(meta.annotations, obj=reservation.name))
        self.cache.add_reservation(placed)
        for write in outcome.writes.objects:  # placed over running pods: they now say so
            self._annotate_pod(write)
        return outcome, placed

    def _annotate_pod(self, write: ObjectWrite) -> None:
        """Apply in memory a PreBind write of another pod's annotations (a pre-allocated pod's
        `reservation-allocated`), as the live binder would patch it; other writes are left."""
        meta = write.patch.get("metadata")
        changes = meta.get("annotations") if write.resource == names.CORE_PODS and isinstance(meta, Mapping) else None
        info = self.cache.pod_info(str(meta.get("uid", ""))) if isinstance(meta, Mapping) else None
        if not isinstance(changes, Mapping) or info is None:
            return
        annotations = {**info.pod.meta.annotations, **{str(k): str(v) for k, v in changes.items() if v is not None}}
        pod = dataclasses.replace(info.pod, meta=dataclasses.replace(info.pod.meta, annotations=annotations))
        self.cache.add_pod(pod)

    def observe_pod(self, pod: Pod) -> None:
        """Tell every profile that a pod exists (pending or bound), before it is scheduled: a
        gang is schedulable only once min of its members exist."""
        for framework in self.frameworks.values():
            framework.pod_added(pod)

    def observe_pod_group(self, group: PodGroup) -> None:
        """A PodGroup (of either API) exists: to the plugins that watch PodGroups, through their
        feeds, as the live scheduler's informer would hand it."""
        self.feeds.deliver(group.resource, group)

    def forget_pod_group(self, group: PodGroup) -> None:
        """A PodGroup is gone."""
        self.feeds.deliver(group.resource, group, deleted=True)

    def queue_order(self, pods: Sequence[Pod]) -> list[int]:
        """Positions in `pods`, in the order to schedule them: as given, except that the members
        of one gang group are moved up to where the group's first member is, so they are
        scheduled one after another. Gang members must have been observed (`observe_pod`)."""
        first: dict[str, int] = {}
        keys = []
        for i, pod in enumerate(pods):
            framework = self.framework_for(pod) or self._default
            group = framework.queue_group(pod)
            keys.append(i if group is None else first.setdefault(group, i))
        return sorted(range(len(pods)), key=keys.__getitem__)

    def resolve_waiting(self, *, now: float | None = None) -> list[Outcome]:
        """Bind waiting pods that were allowed, undo those rejected or timed out (at `now`,
        else the clock's time)."""
        return [Outcome.of(attempt) for attempt in self.cycle.resolve_waiting(now=now)]

    def _commit(self, placement: Placement[None]) -> Status:
        """Bind in memory: PreBind, the Bind plugins; when all SKIP, the pod is confirmed in the
        cache on its node with PreBind's annotations. Then PostBind."""
        info, node = placement.pod, placement.node
        status = pre_bind(placement)
        if not status.is_success:
            return status
        status = placement.framework.run_bind(placement.state, info, node)
        if status.code is Code.SKIP:
            self.cache.confirm(_bound(info.pod, node, placement.writes.annotations))
            status = SUCCESS
        if not status.is_success:
            return status
        placement.framework.run_post_bind(placement.state, info, node)
        log.log(logging.INFO - 4, "Placed pod", extra={"pod": info.key, "node": node})
        return SUCCESS


def _bound(pod: Pod, node: str, changes: Mapping[str, str | None]) -> Pod:
    annotations = {**pod.meta.annotations, **changes}
    meta: ObjectMeta = dataclasses.replace(
        pod.meta, annotations={key: value for key, value in annotations.items() if value is not None}
    )
    return dataclasses.replace(pod, meta=meta, node_name=node, phase="Running" if pod.phase == "Pending" else pod.phase)
