"""The synchronous scheduler: one pod in, one placement out, committed to the cache.

`Scheduler` builds a Framework per profile from a SchedulerConfig and the plugin registry, and
runs the whole cycle for one pod — schedule, assume, Reserve, Permit, PreBind, Bind — binding
in memory (the pod is added back to the cache on its node, with the annotations PreBind asked
for). `tessera what-if`, `tessera simulate` and `tessera bench scheduler` drive it directly; the
live scheduler service uses the same frameworks but binds through the API server, asynchronously.

Deterministic: one seeded RNG breaks score ties, and time comes from an injected clock (only
Permit deadlines use it).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from apis.k8s.core import Pod
from apis.k8s.meta import ObjectMeta
from scheduler.cache import ClusterCache, PodInfo
from scheduler.core.frameworks import build_frameworks
from scheduler.framework.config import PluginRef, SchedulerConfig
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import Diagnosis
from scheduler.framework.runtime import Framework, Registry
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.plugins import DEFAULT_PLUGINS, REGISTRY

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

    @property
    def scheduled(self) -> bool:
        return self.status.is_success and self.node is not None


@dataclass(slots=True)
class _Waiting:
    framework: Framework
    state: CycleState
    pod: PodInfo
    node: str


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
        self._clock = clock
        self.frameworks = build_frameworks(
            self.config, self.cache, registry=registry, default_plugins=default_plugins, seed=seed
        )
        self._default = self.frameworks[self.config.profiles[0].scheduler_name]
        self._waiting: dict[str, _Waiting] = {}

    def framework_for(self, pod: Pod) -> Framework | None:
        """The profile named by the pod's schedulerName, or None when it is not ours."""
        return self.frameworks.get(pod.scheduler_name)

    def schedule_one(self, pod: Pod, *, profile: str | None = None, diagnose: bool = True) -> Outcome:
        """Schedule and bind one pending pod. Never raises for a pod that does not fit.

        The profile is `profile`, else the pod's schedulerName, else the first profile (what-if
        and the simulator schedule pods written for other schedulers too).
        """
        framework = self.frameworks[profile] if profile else self.framework_for(pod) or self._default
        info = PodInfo.of(pod)
        if self.cache.pod_node(info.ident) is not None:
            # Scheduling it again would count it twice (a snapshot listing the same pod twice).
            return Outcome(pod.key, None, Status.error(f"pod {pod.key} is already scheduled or running"))
        state = CycleState()
        result = framework.schedule(state, info, diagnose=diagnose)
        if result.node is None:
            return Outcome(pod.key, None, result.status, diagnosis=result.diagnosis)
        node = result.node
        self.cache.assume(info, node)
        status = framework.run_reserve(state, info, node)
        if status.is_success:
            status = framework.run_permit(state, info, node, now=self._clock())
            if status.code is Code.WAIT:
                self._waiting[info.ident] = _Waiting(framework, state, info, node)
                return Outcome(pod.key, node, status, diagnosis=result.diagnosis)
        if not status.is_success:
            self._undo(framework, state, info, node)
            return Outcome(pod.key, None, status, diagnosis=result.diagnosis)
        return self._bind(framework, state, info, node, result.diagnosis)

    def resolve_waiting(self) -> list[Outcome]:
        """Bind waiting pods that were allowed, undo those rejected or timed out."""
        now = self._clock()
        out = []
        for framework in self.frameworks.values():
            framework.expire_waiting(now=now)
        for ident, waiting in list(self._waiting.items()):
            decision = waiting.framework.waiting_pod(ident)
            if decision is None or decision.decision is None:
                continue
            del self._waiting[ident]
            waiting.framework.remove_waiting(ident)
            if decision.decision.is_success:
                out.append(self._bind(waiting.framework, waiting.state, waiting.pod, waiting.node, Diagnosis()))
            else:
                self._undo(waiting.framework, waiting.state, waiting.pod, waiting.node)
                out.append(Outcome(waiting.pod.key, None, decision.decision))
        return out

    def _bind(self, framework: Framework, state: CycleState, info: PodInfo, node: str, diagnosis: Diagnosis) -> Outcome:
        status, patch = framework.run_pre_bind(state, info, node)
        if status.is_success:
            status = framework.run_bind(state, info, node)
            if status.code is Code.SKIP:
                self.cache.confirm(_bound(info.pod, node, patch.annotations))
                status = SUCCESS
        if not status.is_success:
            self._undo(framework, state, info, node)
            return Outcome(info.key, None, status, diagnosis=diagnosis)
        framework.run_post_bind(state, info, node)
        log.log(logging.INFO - 4, "Placed pod", extra={"pod": info.key, "node": node})
        return Outcome(info.key, node, SUCCESS, dict(patch.annotations), diagnosis)

    def _undo(self, framework: Framework, state: CycleState, info: PodInfo, node: str) -> None:
        framework.run_unreserve(state, info, node)
        self.cache.forget(info.ident)


def _bound(pod: Pod, node: str, annotations: Mapping[str, str]) -> Pod:
    meta: ObjectMeta = dataclasses.replace(pod.meta, annotations={**pod.meta.annotations, **annotations})
    return dataclasses.replace(pod, meta=meta, node_name=node, phase="Running" if pod.phase == "Pending" else pod.phase)
