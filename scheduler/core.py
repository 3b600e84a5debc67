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
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from apis.k8s.core import Pod
from apis.k8s.meta import ObjectMeta
from scheduler import fragmentation
from scheduler.cache import ClusterCache, PodInfo
from scheduler.framework.config import PluginRef, PluginSet, SchedulerConfig
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import Diagnosis
from scheduler.framework.interfaces import ExtensionPoint, Handle
from scheduler.framework.runtime import Framework, PointObserver, Registry
from scheduler.framework.scoring import ScoringStrategyType
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.plugins import DEFAULT_PLUGINS, FGD_PLUGIN, REGISTRY, SCORING_STRATEGY_PLUGINS, deviceshare

__all__ = [
    "FGD",
    "SCORING_CHOICES",
    "Outcome",
    "Scheduler",
    "build_frameworks",
    "with_fgd",
    "with_percentage_of_nodes_to_score",
    "with_scoring",
    "with_scoring_choice",
]

#: The `--scoring` choice that places by fragmentation (FGD) rather than by a resource strategy.
FGD = "FGD"
#: What `--scoring` accepts: the resource-allocation strategies, and FGD.
SCORING_CHOICES: tuple[str, ...] = (*(t.value for t in ScoringStrategyType), FGD)

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


def build_frameworks(
    config: SchedulerConfig,
    cache: ClusterCache,
    *,
    registry: Registry = REGISTRY,
    default_plugins: tuple[PluginRef, ...] = DEFAULT_PLUGINS,
    seed: int = 0,
    observer: Callable[[str], PointObserver | None] = lambda profile: None,
) -> dict[str, Framework]:
    """One Framework per profile over `cache`, sharing one seeded RNG for score ties;
    `observer(profile)` gives each its extension point observer. Raises ConfigError."""
    rng = random.Random(seed)
    return {
        profile.scheduler_name: Framework.build(
            profile,
            registry=registry,
            default_plugins=default_plugins,
            handle=Handle(cache, profile.scheduler_name),
            percentage_of_nodes_to_score=config.percentage_for(profile),
            rng=rng,
            observer=observer(profile.scheduler_name),
        )
        for profile in config.profiles
    }


def _bound(pod: Pod, node: str, annotations: Mapping[str, str]) -> Pod:
    meta: ObjectMeta = dataclasses.replace(pod.meta, annotations={**pod.meta.annotations, **annotations})
    return dataclasses.replace(pod, meta=meta, node_name=node, phase="Running" if pod.phase == "Pending" else pod.phase)


def with_scoring(config: SchedulerConfig, strategy: ScoringStrategyType) -> SchedulerConfig:
    """The config with `scoringStrategy.type` set on every resource-scoring plugin of every
    profile (NodeResourcesFit, DeviceShare): one switch between spreading and packing."""
    profiles = []
    for profile in config.profiles:
        plugin_args = dict(profile.plugin_args)
        for name in SCORING_STRATEGY_PLUGINS:
            args = dict(plugin_args.get(name) or {})
            current = args.get("scoringStrategy")
            strategy_args = dict(current) if isinstance(current, Mapping) else {}
            strategy_args["type"] = strategy.value
            args["scoringStrategy"] = strategy_args
            plugin_args[name] = args
        profiles.append(dataclasses.replace(profile, plugin_args=plugin_args))
    return dataclasses.replace(config, profiles=tuple(profiles))


def with_percentage_of_nodes_to_score(config: SchedulerConfig, percentage: int) -> SchedulerConfig:
    """The config with every profile scoring `percentage` % of nodes (100: all feasible nodes)."""
    profiles = tuple(dataclasses.replace(p, percentage_of_nodes_to_score=None) for p in config.profiles)
    return dataclasses.replace(config, profiles=profiles, percentage_of_nodes_to_score=percentage)


def with_fgd(config: SchedulerConfig, workload: Sequence[tuple[fragmentation.TaskShape, int]] = ()) -> SchedulerConfig:
    """The config with every profile placing by FGD (Fragmentation Gradient Descent): the
    GPUFragmentation plugin scores nodes, DeviceShare places a share of one GPU by its
    FragmentationAware policy, and the resource-allocation scores (NodeResourcesFit,
    DeviceShare) are disabled so that, as in the paper, the fragmentation measure alone ranks
    nodes (other preferences — taints, preferred affinity — still count). Both measure against
    `workload` (shape, weight) when given, else against a workload learned from the pods seen.
    """
    workload_args = {"targetWorkload": fragmentation.shapes_to_args(workload)} if workload else {}
    profiles = []
    for profile in config.profiles:
        plugin_args = dict(profile.plugin_args)
        device_args = dict(plugin_args.get(deviceshare.NAME) or {})
        device_args["allocationPolicy"] = deviceshare.FragmentationAwarePolicy.name
        device_args.update(workload_args)
        plugin_args[deviceshare.NAME] = device_args
        plugin_args[FGD_PLUGIN] = {**(plugin_args.get(FGD_PLUGIN) or {}), **workload_args}
        multi = profile.multi_point
        if all(ref.name != FGD_PLUGIN for ref in multi.enabled):
            multi = dataclasses.replace(multi, enabled=(*multi.enabled, PluginRef(FGD_PLUGIN)))
        points = dict(profile.points)
        score = points.get(ExtensionPoint.SCORE, PluginSet())
        points[ExtensionPoint.SCORE] = dataclasses.replace(
            score, disabled=score.disabled | set(SCORING_STRATEGY_PLUGINS) - {FGD_PLUGIN}
        )
        profiles.append(dataclasses.replace(profile, multi_point=multi, points=points, plugin_args=plugin_args))
    return dataclasses.replace(config, profiles=tuple(profiles))


def with_scoring_choice(
    config: SchedulerConfig, choice: str, workload: Sequence[tuple[fragmentation.TaskShape, int]] = ()
) -> SchedulerConfig:
    """`--scoring`: a resource-allocation strategy (`with_scoring`) or FGD (`with_fgd`, with
    `workload` as its target). Raises ValueError for another choice."""
    if choice == FGD:
        return with_fgd(config, workload)
    return with_scoring(config, ScoringStrategyType(choice))
