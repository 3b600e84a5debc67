"""The framework runtime: runs one profile's plugins at each extension point for one pod.

`Framework.build` turns a ProfileConfig into plugin instances (via an injected registry, so
this layer never imports plugins). `schedule` is kube-scheduler's scheduling algorithm:

1. PreFilter every plugin (a rejection ends the cycle; SKIP drops that plugin's Filter; node
   sets narrow the search).
2. Filter nodes in a rotating order, stopping once enough feasible nodes are found
   (`percentageOfNodesToScore`; adaptive by default: 50% − nodes/125, at least 5% and at least
   100 nodes), and keep every rejection per node for diagnosis.
3. No feasible node: when asked to diagnose, also filter the nodes PreFilter ruled out (so every
   node has a precise reason), then PostFilter.
4. PreScore and Score the feasible nodes, normalize, weight, sum; ties broken by the seeded RNG.

The rest of the cycle (Reserve, Permit, PreBind, Bind, PostBind, Unreserve) are separate calls
so a caller can assume the pod in the cache in between and bind asynchronously; the one caller
that strings them together is `scheduler.core.cycle`.

Two optional outputs serve the live scheduler's diagnostics without touching decisions: an
`observer` gets the duration of every extension point (its latency histograms), and
`schedule(..., record_scores=True)` returns each plugin's weighted score per scored node (the
top-N score table).

Pure and deterministic given the cache, the pod and the RNG seed. A plugin exception becomes an
ERROR status naming the plugin, with the stack logged; it never escapes a cycle.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
import types
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from apis.errors import ConfigError
from apis.k8s.core import Pod
from scheduler.cache import ClusterCache, NodeInfo, PodInfo
from scheduler.cache.reservations import HeldReservation
from scheduler.framework.config import PluginRef, ProfileConfig
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import Diagnosis
from scheduler.framework.feeds import Feeds
from scheduler.framework.interfaces import (
    POINT_CLASSES,
    BindPlugin,
    ExtensionPoint,
    FilterPlugin,
    Handle,
    PermitPlugin,
    Plugin,
    PodSetExtension,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortExtension,
    ReservePlugin,
    ScorePlugin,
)
from scheduler.framework.preemption import Preemption
from scheduler.framework.shared import NOMINATED_RESERVATIONS, PRE_ALLOCATED, check_order
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.framework.waiting import MAX_PERMIT_TIMEOUT, WaitingPod
from scheduler.framework.writes import Write, Writes

__all__ = [
    "MIN_FEASIBLE_NODES_TO_FIND",
    "Framework",
    "PluginFactory",
    "PointObserver",
    "Registry",
    "ScheduleResult",
    "ScoreTable",
    "num_feasible_nodes_to_find",
]

log = logging.getLogger(__name__)
_O = TypeVar("_O")

#: A plugin's constructor: raw args from the config (None when not given) and the handle.
#: Raises ConfigError for bad arguments.
PluginFactory = Callable[[Mapping[str, object] | None, Handle], Plugin]
Registry = Mapping[str, PluginFactory]
#: Told how long each extension point took for one pod: (point, resulting code, seconds).
#: Called on the scheduling thread; it must be cheap and must not raise.
PointObserver = Callable[[ExtensionPoint, Code, float], None]

#: kube-scheduler's floor on the number of feasible nodes to look for before scoring.
MIN_FEASIBLE_NODES_TO_FIND = 100
_MIN_ADAPTIVE_PERCENTAGE = 5
#: Pod shapes whose per-node results are remembered (least recently used ones are dropped).
_MEMO_SHAPES = 64
#: (Score plugin set, epochs) ids remembered before starting over.
_ACTIVE_IDS = 1024


def num_feasible_nodes_to_find(total: int, percentage: int) -> int:
    """How many feasible nodes to find before scoring (kube-scheduler's rule)."""
    if total < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return total
    if percentage <= 0:
        percentage = max(50 - total // 125, _MIN_ADAPTIVE_PERCENTAGE)
    return max(total * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(frozen=True, slots=True)
class ScoreTable:
    """Each plugin's weighted, normalized score on each scored node (`record_scores=True`).

    `scores[i][j]` is plugin `plugins[j]` on node `nodes[i]`; `totals[i]` is their sum, the value
    the node was picked by. A single feasible node is not scored: it appears with no scores.
    """

    nodes: tuple[str, ...] = ()
    plugins: tuple[str, ...] = ()
    scores: tuple[tuple[int, ...], ...] = ()
    totals: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    """Where the pod should go (`node`), or why not (`status`, `diagnosis`)."""

    node: str | None
    status: Status
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    #: Nodes whose filters ran, and how many of them passed.
    evaluated_nodes: int = 0
    feasible_nodes: int = 0
    #: Node PostFilter (preemption) nominated, if any.
    nominated_node: str | None = None
    #: Per-plugin scores, when asked for with `record_scores=True`.
    scores: ScoreTable | None = None
    #: What PostFilter decided to evict so the pod fits on `nominated_node`, if anything.
    preemption: Preemption | None = None


class MemoEntry:
    """One node's results for one pod shape (`Plugin.memo_key`), valid while the node's
    `generation` is what it was when they were computed: the Filter chain's status, and the raw
    scores of the Score plugins that were active (`active_id`, see `Framework._active_id`; -1
    before any were computed). Owned by the runtime's memo; mutable so that scores computed later
    are kept with the status."""

    __slots__ = ("active_id", "generation", "scores", "status")

    def __init__(self, generation: int, status: Status) -> None:
        self.generation = generation
        self.status = status
        self.scores: tuple[int, ...] = ()
        self.active_id = -1


class Framework:
    """One profile's plugins, run per extension point. Build with `Framework.build`."""

    def __init__(
        self,
        *,
        cache: ClusterCache,
        profile: str,
        scheduler: dict[Hashable, object] | None = None,
        feeds: Feeds | None = None,
        percentage_of_nodes_to_score: int = 0,
        rng: random.Random | None = None,
        observer: PointObserver | None = None,
    ) -> None:
        """A framework with no plugins yet, and the `Handle` its plugins are built with: `build`
        builds them and installs them. The handle's `check` runs this framework's PreFilter and
        Filter chains, so it is complete before any plugin sees it (nothing is patched later).
        `scheduler` and `feeds` are the scheduler's, shared with its other profiles' frameworks
        (fresh ones for a framework on its own)."""
        self._checks = _ProfileChecks(self)
        self.handle = Handle(
            cache,
            profile,
            scheduler=scheduler if scheduler is not None else {},
            feeds=feeds if feeds is not None else Feeds(),
            check=self._checks,
        )
        self._observer = observer
        self.profile = profile
        self._percentage = percentage_of_nodes_to_score
        self._rng = rng if rng is not None else random.Random(0)
        self._next_start = 0
        self._waiting: dict[str, WaitingPod] = self.handle.waiting
        #: memo key -> node name -> that node's results for pods of that shape
        self._memo: OrderedDict[Hashable, dict[str, MemoEntry]] = OrderedDict()
        #: (active Score plugins, their score epochs) -> an id, never reused (`_active_id`).
        self._active_ids: dict[tuple[tuple[str, ...], tuple[Hashable, ...]], int] = {}
        self._next_active_id = itertools.count()
        self._install({}, {})

    def _install(self, plugins: Mapping[ExtensionPoint, Sequence[Plugin]], weights: Mapping[str, int]) -> None:
        """Put the plugins at their extension points (in the order given) and their score weights."""

        def at(point: ExtensionPoint) -> Sequence[Plugin]:
            return plugins.get(point, ())

        self._pre_filter = [p for p in at(ExtensionPoint.PRE_FILTER) if isinstance(p, PreFilterPlugin)]
        self._filter = [p for p in at(ExtensionPoint.FILTER) if isinstance(p, FilterPlugin)]
        post_filter = [p for p in at(ExtensionPoint.POST_FILTER) if isinstance(p, PostFilterPlugin)]
        self._post_filter = sorted(post_filter, key=lambda p: p.runs_last)
        self._pre_score = [p for p in at(ExtensionPoint.PRE_SCORE) if isinstance(p, PreScorePlugin)]
        self._score = [p for p in at(ExtensionPoint.SCORE) if isinstance(p, ScorePlugin)]
        self._reserve = [p for p in at(ExtensionPoint.RESERVE) if isinstance(p, ReservePlugin)]
        self._permit = [p for p in at(ExtensionPoint.PERMIT) if isinstance(p, PermitPlugin)]
        self._pre_bind = [p for p in at(ExtensionPoint.PRE_BIND) if isinstance(p, PreBindPlugin)]
        self._bind = [p for p in at(ExtensionPoint.BIND) if isinstance(p, BindPlugin)]
        self._post_bind = [p for p in at(ExtensionPoint.POST_BIND) if isinstance(p, PostBindPlugin)]
        for point, group in plugins.items():
            for plugin in group:
                if not isinstance(plugin, POINT_CLASSES[point]):
                    raise ConfigError(f"plugin {plugin.name} does not implement {point.value}")
        self._weights = dict(weights)
        seen: dict[str, Plugin] = {}
        for group in plugins.values():
            for p in group:
                seen.setdefault(p.name, p)
        self._plugins = seen
        self._pod_sets = [p for p in seen.values() if isinstance(p, PodSetExtension)]
        self._queue_sorts = [p for p in seen.values() if isinstance(p, QueueSortExtension)]

    # --- construction -----------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        profile: ProfileConfig,
        *,
        registry: Registry,
        default_plugins: Sequence[PluginRef],
        cache: ClusterCache,
        scheduler: dict[Hashable, object] | None = None,
        feeds: Feeds | None = None,
        percentage_of_nodes_to_score: int = 0,
        rng: random.Random | None = None,
        observer: PointObserver | None = None,
    ) -> Framework:
        """Instantiate the profile's plugins with the framework's `Handle` (`scheduler` and
        `feeds` the scheduler's: see `__init__`) and install them. Raises ConfigError listing
        every problem."""
        framework = cls(
            cache=cache,
            profile=profile.scheduler_name,
            scheduler=scheduler,
            feeds=feeds,
            percentage_of_nodes_to_score=percentage_of_nodes_to_score,
            rng=rng,
            observer=observer,
        )
        handle = framework.handle
        problems: list[str] = []
        enabled: dict[str, int | None] = {}
        if "*" not in profile.multi_point.disabled:
            enabled = {ref.name: ref.weight for ref in default_plugins if ref.name not in profile.multi_point.disabled}
        for ref in profile.multi_point.enabled:
            enabled[ref.name] = ref.weight if ref.weight is not None else enabled.get(ref.name)
        extra = [ref.name for pset in profile.points.values() for ref in pset.enabled if ref.name not in enabled]
        instances: dict[str, Plugin] = {}
        for name in [*enabled, *dict.fromkeys(extra)]:
            factory = registry.get(name)
            if factory is None:
                problems.append(f"plugin {name!r} is not registered (known: {', '.join(sorted(registry))})")
                continue
            try:
                instances[name] = factory(profile.plugin_args.get(name), handle)
            except ConfigError as e:
                problems.append(f"plugin {name}: {e}")
        for name in profile.plugin_args:
            if name not in registry:
                problems.append(f"pluginConfig names unknown plugin {name!r}")
        points: dict[ExtensionPoint, list[Plugin]] = {}
        weights = {name: weight or 1 for name, weight in enabled.items()}
        # Defaults that do not score, unless the profile's multiPoint names them again.
        unscored = {ref.name for ref in default_plugins if not ref.score} - {
            r.name for r in profile.multi_point.enabled
        }
        for point, base in POINT_CLASSES.items():
            pset = profile.points.get(point)
            disabled = pset.disabled if pset is not None else frozenset()
            if point is ExtensionPoint.SCORE:
                disabled = disabled | unscored
            chosen = [] if "*" in disabled else [n for n in enabled if n not in disabled]
            for ref in pset.enabled if pset is not None else ():
                if ref.name not in chosen:
                    chosen.append(ref.name)
                if point is ExtensionPoint.SCORE and ref.weight is not None:
                    weights[ref.name] = ref.weight
            explicit = {ref.name for ref in pset.enabled} if pset is not None else set()
            for name in chosen:
                plugin = instances.get(name)
                if plugin is None:
                    continue
                if isinstance(plugin, base):
                    points.setdefault(point, []).append(plugin)
                elif name in explicit:
                    problems.append(f"plugin {name} does not implement the {point.value} extension point")
        problems.extend(check_order(points))
        if problems:
            raise ConfigError(f"profile {profile.scheduler_name}: " + "; ".join(problems))
        framework._install(points, weights)
        framework._checks.ready = True
        return framework

    # --- introspection ----------------------------------------------------------------------------
    def plugin(self, name: str) -> Plugin | None:
        return self._plugins.get(name)

    def plugin_names(self, point: ExtensionPoint) -> list[str]:
        groups: dict[ExtensionPoint, Sequence[Plugin]] = {
            ExtensionPoint.PRE_FILTER: self._pre_filter,
            ExtensionPoint.FILTER: self._filter,
            ExtensionPoint.POST_FILTER: self._post_filter,
            ExtensionPoint.PRE_SCORE: self._pre_score,
            ExtensionPoint.SCORE: self._score,
            ExtensionPoint.RESERVE: self._reserve,
            ExtensionPoint.PERMIT: self._permit,
            ExtensionPoint.PRE_BIND: self._pre_bind,
            ExtensionPoint.BIND: self._bind,
            ExtensionPoint.POST_BIND: self._post_bind,
        }
        return [p.name for p in groups[point]]

    def weight(self, name: str) -> int:
        return self._weights.get(name, 1)

    # --- around the cycle: what plugins that reason about sets of pods are told --------------------
    def pod_added(self, pod: Pod) -> None:
        """Tell the plugins that count sets of pods (gangs) that a pod exists, pending or not."""
        for plugin in self._pod_sets:
            self._tell(plugin, plugin.pod_added, pod, pod.key)

    def pod_deleted(self, pod: Pod) -> None:
        for plugin in self._pod_sets:
            self._tell(plugin, plugin.pod_deleted, pod, pod.key)

    def queue_group(self, pod: Pod) -> str | None:
        """The set a pending pod must be dequeued with (its gang group), or None."""
        for plugin in self._queue_sorts:
            group = plugin.queue_group(pod)
            if group is not None:
                return group
        return None

    def _tell(self, plugin: Plugin, call: Callable[[_O], None], obj: _O, key: str) -> None:
        """A bug in a plugin's bookkeeping is logged, never raised into an informer."""
        try:
            call(obj)
        except Exception:
            log.exception("Plugin failed", extra={"profile": self.profile, "plugin": plugin.name, "object": key})

    # --- the scheduling algorithm -----------------------------------------------------------------
    def schedule(
        self, state: CycleState, pod: PodInfo, *, diagnose: bool = True, record_scores: bool = False
    ) -> ScheduleResult:
        """Pick a node for the pod (nothing is reserved). Never raises.

        `diagnose=False` skips the work that only explains a failure (filtering nodes PreFilter
        already ruled out); the simulator and benchmarks use it, a live scheduler should not.
        `record_scores=True` keeps every plugin's score per node in `ScheduleResult.scores`.
        """
        try:
            return self._schedule(state, pod, diagnose, record_scores)
        except Exception as e:
            return ScheduleResult(None, self._crash(e, "schedule", pod))

    def _schedule(self, state: CycleState, pod: PodInfo, diagnose: bool, record_scores: bool) -> ScheduleResult:
        nodes = self.handle.cache.nodes()
        diagnosis = Diagnosis()
        if not nodes:
            return ScheduleResult(None, Status.unschedulable("no nodes available to schedule pods"), diagnosis)
        start = time.perf_counter()
        result, status = self.run_pre_filter(state, pod)
        start = self._observe(ExtensionPoint.PRE_FILTER, status.code, start)
        if not status.is_success:
            diagnosis.pre_filter_status = status
            nominated = None
            if status.code is Code.UNSCHEDULABLE and self._post_filter:
                # As kube: a PreFilter rejection that room could cure (a quota's used) may preempt.
                nominated = self._post_filter_and_observe(state, pod, diagnosis, start)
            summary = Status(status.code, (diagnosis.summary(len(nodes)),), status.plugin, status.shortfalls)
            preemption = state.preemption if nominated is not None else None
            return ScheduleResult(None, summary, diagnosis, nominated_node=nominated, preemption=preemption)
        allowed = result.node_names if result is not None else None
        ahead = self.handle.cache.nominator.ahead_of(pod) if self.handle.cache.nominator else None
        viewed = state.get(NOMINATED_RESERVATIONS) or state.get(PRE_ALLOCATED)
        memo = self._memo_for(state, pod) if not ahead and not viewed else None
        feasible, entries, evaluated = self._find_feasible(
            state, pod, nodes, allowed, diagnosis, memo=memo, ahead=ahead
        )
        if not feasible:
            if allowed is not None and diagnose:
                for info in nodes:
                    if info.name not in allowed:
                        diagnosis.node_statuses[info.name] = self.run_filters(state, pod, self.node_view(state, info))
            start = self._observe(ExtensionPoint.FILTER, Code.UNSCHEDULABLE, start)
            nominated = None
            if self._post_filter:
                nominated = self._post_filter_and_observe(state, pod, diagnosis, start)
            codes = {s.code for s in diagnosis.node_statuses.values()}
            if Code.ERROR in codes:
                error = next(s for s in diagnosis.node_statuses.values() if s.code is Code.ERROR)
                return ScheduleResult(None, error, diagnosis, evaluated)
            # Preemption may help as soon as one node rejected the pod only for lack of room.
            unresolvable = codes == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
            code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
            fail = Status(code, (diagnosis.summary(len(nodes)),))
            preemption = state.preemption if nominated is not None else None
            return ScheduleResult(None, fail, diagnosis, evaluated, 0, nominated, preemption=preemption)
        start = self._observe(ExtensionPoint.FILTER, Code.SUCCESS, start)
        if len(feasible) == 1:
            table = ScoreTable(nodes=(feasible[0].name,)) if record_scores else None
            return ScheduleResult(feasible[0].name, SUCCESS, diagnosis, evaluated, 1, scores=table)
        status = self.run_pre_score(state, pod, feasible)
        start = self._observe(ExtensionPoint.PRE_SCORE, status.code, start)
        if not status.is_success:
            return ScheduleResult(None, status, diagnosis, evaluated, len(feasible))
        columns: list[tuple[str, list[int]]] | None = [] if record_scores else None
        totals = self.run_score(state, pod, feasible, entries, breakdown=columns)
        self._observe(ExtensionPoint.SCORE, Code.SUCCESS, start)
        best = max(totals)
        ties = [i for i, t in enumerate(totals) if t == best]
        pick = ties[0] if len(ties) == 1 else ties[self._rng.randrange(len(ties))]
        table = None
        if columns is not None:
            table = ScoreTable(
                nodes=tuple(info.name for info in feasible),
                plugins=tuple(name for name, _ in columns),
                scores=tuple(zip(*(scores for _, scores in columns), strict=True)) if columns else ((),) * len(totals),
                totals=tuple(totals),
            )
        return ScheduleResult(feasible[pick].name, SUCCESS, diagnosis, evaluated, len(feasible), scores=table)

    def _post_filter_and_observe(
        self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis, start: float
    ) -> str | None:
        nominated, post = self.run_post_filter(state, pod, diagnosis.node_statuses)
        diagnosis.post_filter_status = post
        self._observe(ExtensionPoint.POST_FILTER, post.code, start)
        return nominated

    def _observe(self, point: ExtensionPoint, code: Code, start: float) -> float:
        """Report how long `point` took since `start`; returns now (the next point's start)."""
        now = time.perf_counter()
        if self._observer is not None:
            self._observer(point, code, now - start)
        return now

    def run_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        """Run every PreFilter; intersect their node sets. A rejection carries its plugin."""
        merged: frozenset[str] | None = None
        for plugin in self._pre_filter:
            result, status = plugin.pre_filter(state, pod)
            if status.code is Code.SKIP:
                state.skip_filter.add(plugin.name)
            elif not status.is_success:
                return None, _with_plugin(status, plugin.name)
            if result is not None and result.node_names is not None:
                merged = result.node_names if merged is None else merged & result.node_names
        return (PreFilterResult(merged) if merged is not None else None), SUCCESS

    def _active_filters(self, state: CycleState) -> list[Callable[[CycleState, PodInfo, NodeInfo], Status]]:
        skip = state.skip_filter
        return [p.filter for p in self._filter if p.name not in skip]

    def run_filters(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """The first rejection of the node by a (non-skipped) Filter, or SUCCESS."""
        return _run_chain(self._active_filters(state), state, pod, node)

    def diagnose_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> list[Status]:
        """Every rejection of the node (all Filters run, not just up to the first failure)."""
        out = []
        for check in self._active_filters(state):
            status = check(state, pod, node)
            if status.code is not Code.SUCCESS:
                out.append(status)
        return out

    def _memo_for(self, state: CycleState, pod: PodInfo) -> dict[str, MemoEntry] | None:
        """This pod shape's per-node results, if every Filter and Score plugin gives a key."""
        parts: list[Hashable] = [frozenset(state.skip_filter)]
        for plugin in itertools.chain(self._filter, self._score):
            key = plugin.memo_key(state, pod)
            if key is None:
                return None
            parts.append(key)
        shape = tuple(parts)
        table = self._memo.get(shape)
        if table is None:
            if len(self._memo) >= _MEMO_SHAPES:
                self._memo.popitem(last=False)
            table = self._memo[shape] = {}
        else:
            self._memo.move_to_end(shape)
        return table

    def _find_feasible(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: Sequence[NodeInfo],
        allowed: frozenset[str] | None,
        diagnosis: Diagnosis,
        *,
        memo: dict[str, MemoEntry] | None,
        ahead: Mapping[str, Sequence[PodInfo]] | None = None,
    ) -> tuple[list[NodeInfo], list[MemoEntry] | None, int]:
        """`ahead`: per node, nominated pods to count there first (`Nominator.ahead_of`); the
        caller passes no memo with them (a node's result then depends on the pod's priority)."""
        total = len(nodes)
        start = self._next_start % total
        order: Iterable[NodeInfo]
        if allowed is None:
            order = itertools.chain(itertools.islice(nodes, start, None), itertools.islice(nodes, 0, start))
        else:
            positions = self.handle.cache.positions()
            chosen = [positions[name] for name in allowed if name in positions]
            chosen.sort(key=lambda i: (i - start) % total)
            order = [nodes[i] for i in chosen]
        want = num_feasible_nodes_to_find(total, self._percentage)
        filters = self._active_filters(state)
        statuses = diagnosis.node_statuses
        feasible: list[NodeInfo] = []
        entries: list[MemoEntry] = []
        evaluated = 0
        # Two copies of the loop: this is the hottest code of the scheduler.
        if memo is not None:
            lookup = memo.get
            keep_entry = entries.append
            keep_node = feasible.append
            left = want
            for info in order:
                evaluated += 1
                name = info.name
                entry = lookup(name)
                if entry is None or entry.generation != info.generation:
                    entry = memo[name] = MemoEntry(info.generation, _run_chain(filters, state, pod, info))
                if entry.status is not SUCCESS:  # _run_chain returns this very object when all pass
                    statuses[name] = entry.status
                    continue
                keep_entry(entry)
                keep_node(info)
                left -= 1
                if not left:
                    break
        else:
            reservations, pre_allocated = state.get(NOMINATED_RESERVATIONS), state.get(PRE_ALLOCATED)
            for info in order:
                evaluated += 1
                status = _run_chain(filters, state, pod, _view(info, ahead, reservations, pre_allocated))
                if status is not SUCCESS:
                    statuses[info.name] = status
                    continue
                feasible.append(info)
                if len(feasible) >= want:
                    break
        # Rotate so the next pod starts where this one stopped, spreading the search.
        if allowed is None:
            self._next_start = (start + evaluated) % total
        elif len(feasible) >= want:
            self._next_start = (self.handle.cache.positions()[feasible[-1].name] + 1) % total
        return feasible, (entries if memo is not None else None), evaluated

    def node_view(
        self, state: CycleState, info: NodeInfo, ahead: Mapping[str, Sequence[PodInfo]] | None = None
    ) -> NodeInfo:
        """The node as the pod's Filters see it: with the nominated pods `ahead` counted first,
        and without the Reservation the pod may use there (`NOMINATED_RESERVATIONS`): its
        resources are the pod's; for a Reservation placed by pre-allocation, without the pods it
        would take over (`PRE_ALLOCATED`). The node itself when none applies."""
        return _view(info, ahead, state.get(NOMINATED_RESERVATIONS), state.get(PRE_ALLOCATED))

    def run_post_filter(
        self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]
    ) -> tuple[str | None, Status]:
        """kube's order: the first PostFilter that makes room wins; an UnschedulableAndUnresolvable
        one or an error stops the chain; otherwise the reasons of all are kept, under the name
        of the first that rejected."""
        reasons: list[str] = []
        rejector = ""
        for plugin in self._post_filter:
            nominated, status = plugin.post_filter(state, pod, statuses)
            if status.is_success:
                return nominated, SUCCESS
            if status.code in (Code.ERROR, Code.UNSCHEDULABLE_AND_UNRESOLVABLE):
                return None, _with_plugin(status, plugin.name)
            reasons.extend(status.reasons)
            rejector = rejector or status.plugin
        return None, Status.unschedulable(*reasons, plugin=rejector)

    def run_pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        for plugin in self._pre_score:
            status = plugin.pre_score(state, pod, nodes)
            if status.code is Code.SKIP:
                state.skip_score.add(plugin.name)
            elif not status.is_success:
                return _with_plugin(status, plugin.name)
        return SUCCESS

    def run_score(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: Sequence[NodeInfo],
        entries: Sequence[MemoEntry] | None = None,
        *,
        breakdown: list[tuple[str, list[int]]] | None = None,
    ) -> list[int]:
        """Weighted sum of normalized scores per node, aligned with `nodes`.

        `entries` (from the memo, aligned with `nodes`) hold raw scores already computed for
        unchanged nodes; missing ones are computed and stored there. When `breakdown` is given,
        each plugin's weighted scores (aligned with `nodes`) are appended to it.
        """
        skip = state.skip_score
        active = [plugin for plugin in self._score if plugin.name not in skip]
        if entries is not None:
            # Raw scores of the active plugins, kept in the memo entry with the id of the set
            # of active plugins (and their score epochs) they were computed for.
            active_id = self._active_id(state, pod, active)
            if len(active) == 1:  # the usual case (the others skip at PreScore): no transposing
                only = active[0]
                column: list[int] = []
                keep = column.append
                for entry, info in zip(entries, nodes, strict=True):
                    if entry.active_id != active_id:
                        entry.scores = (only.score(state, pod, info),)
                        entry.active_id = active_id
                    keep(entry.scores[0])
                columns = [column]
            else:
                raws = []
                for entry, info in zip(entries, nodes, strict=True):
                    if entry.active_id != active_id:
                        entry.scores = tuple(plugin.score(state, pod, info) for plugin in active)
                        entry.active_id = active_id
                    raws.append(entry.scores)
                columns = [list(column) for column in zip(*raws, strict=True)]
        else:
            columns = [[plugin.score(state, pod, info) for info in nodes] for plugin in active]
        totals: list[int] | None = None
        for plugin, scores in zip(active, columns, strict=True):
            if plugin.normalizes:
                plugin.normalize_scores(state, pod, scores)
            weight = self._weights.get(plugin.name, 1)
            weighted = scores if weight == 1 else [s * weight for s in scores]
            totals = list(weighted) if totals is None else [t + s for t, s in zip(totals, weighted, strict=True)]
            if breakdown is not None:
                breakdown.append((plugin.name, weighted))
        return totals if totals is not None else [0] * len(nodes)

    def _active_id(self, state: CycleState, pod: PodInfo, active: Sequence[ScorePlugin]) -> int:
        """The id of raw scores computed by `active` in their current score epochs. Ids are
        never reused (forgetting them, a bound on memory, only costs recomputation)."""
        key = (tuple(p.name for p in active), tuple(p.score_epoch(state, pod) for p in active))
        found = self._active_ids.get(key)
        if found is None:
            if len(self._active_ids) >= _ACTIVE_IDS:
                self._active_ids.clear()
            found = self._active_ids[key] = next(self._next_active_id)
        return found

    # --- after a node is chosen ---------------------------------------------------------------------
    def run_reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Reserve in order; on failure the caller runs `run_unreserve` (all plugins, reversed)."""
        start = time.perf_counter()
        status = self._reserve_all(state, pod, node)
        self._observe(ExtensionPoint.RESERVE, status.code, start)
        return status

    def _reserve_all(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        try:
            for plugin in self._reserve:
                status = plugin.reserve(state, pod, node)
                if not status.is_success:
                    return _with_plugin(status, plugin.name)
        except Exception as e:
            return self._crash(e, "reserve", pod)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Undo every Reserve, in reverse order. Never raises (a failing plugin is logged)."""
        for plugin in reversed(self._reserve):
            try:
                plugin.unreserve(state, pod, node)
            except Exception as e:
                self._crash(e, "unreserve", pod)

    def run_permit(self, state: CycleState, pod: PodInfo, node: str, *, now: float) -> Status:
        """SUCCESS, a rejection, or WAIT — then the pod is in `waiting_pod(ident)` until decided."""
        start = time.perf_counter()
        status = self._permit_all(state, pod, node, now)
        self._observe(ExtensionPoint.PERMIT, status.code, start)
        return status

    def _permit_all(self, state: CycleState, pod: PodInfo, node: str, now: float) -> Status:
        pending: dict[str, float] = {}
        try:
            for plugin in self._permit:
                status = plugin.permit(state, pod, node)
                if status.code is Code.WAIT:
                    timeout = min(status.timeout or MAX_PERMIT_TIMEOUT, MAX_PERMIT_TIMEOUT)
                    pending[plugin.name] = now + timeout
                elif not status.is_success:
                    return _with_plugin(status, plugin.name)
        except Exception as e:
            return self._crash(e, "permit", pod)
        if not pending:
            return SUCCESS
        waiting = WaitingPod(pod, node, pending)
        self._waiting[pod.ident] = waiting
        return Status.wait(waiting.deadline - now)

    def waiting_pod(self, ident: str) -> WaitingPod | None:
        return self._waiting.get(ident)

    def waiting_pods(self) -> list[WaitingPod]:
        return list(self._waiting.values())

    def remove_waiting(self, ident: str) -> WaitingPod | None:
        """Stop tracking a waiting pod (its decision was acted upon)."""
        return self._waiting.pop(ident, None)

    def expire_waiting(self, *, now: float) -> list[WaitingPod]:
        """Reject waiting pods whose deadline passed; returns them (still tracked until removed)."""
        return [w for w in self._waiting.values() if w.expire(now)]

    def run_pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, Writes]:
        """Collect the writes PreBind plugins ask for (`Writes`: the pod's annotations merged in
        plugin order, then other objects); whoever binds makes them before binding. Reads no
        cache: safe on the binder's thread without the lock (see `PreBindPlugin`).

        PreBind and Bind are not reported to the observer: their cost is in the API calls the
        caller makes, so the caller times them.
        """
        asked: list[Write] = []
        try:
            for plugin in self._pre_bind:
                writes, status = plugin.pre_bind(state, pod, node)
                asked.extend(writes)
                if not status.is_success:
                    return _with_plugin(status, plugin.name), Writes.of(asked)
        except Exception as e:
            return self._crash(e, "pre_bind", pod), Writes.of(asked)
        return SUCCESS, Writes.of(asked)

    def run_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """The first Bind plugin that does not SKIP decides; SKIP from all means "bind it yourself"."""
        try:
            for plugin in self._bind:
                status = plugin.bind(state, pod, node)
                if status.code is not Code.SKIP:
                    return _with_plugin(status, plugin.name)
        except Exception as e:
            return self._crash(e, "bind", pod)
        return Status(Code.SKIP)

    def run_post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        start = time.perf_counter()
        for plugin in self._post_bind:
            try:
                plugin.post_bind(state, pod, node)
            except Exception as e:
                self._crash(e, "post_bind", pod)
        self._observe(ExtensionPoint.POST_BIND, Code.SUCCESS, start)

    def _crash(self, error: Exception, point: str, pod: PodInfo) -> Status:
        plugin = _plugin_in_traceback(error.__traceback__)
        log.error(
            "Plugin failed",
            exc_info=error,
            extra={"profile": self.profile, "plugin": plugin, "point": point, "pod": pod.key},
        )
        return Status.error(f"{type(error).__name__}: {error}", plugin=plugin)


class _ProfileChecks:
    """`Handle.check` of a framework's plugins: its PreFilter and Filter chains, callable once
    the plugins are installed (a plugin that asks from its constructor gets an error, not an
    answer from an empty chain)."""

    __slots__ = ("_framework", "ready")

    def __init__(self, framework: Framework) -> None:
        self._framework = framework
        self.ready = False

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        return self._ready().run_pre_filter(state, pod)[1]

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self._ready().run_filters(state, pod, node)

    def _ready(self) -> Framework:
        if not self.ready:
            raise RuntimeError(f"profile {self._framework.profile}: its plugins are not built yet")
        return self._framework


def _view(
    info: NodeInfo,
    ahead: Mapping[str, Sequence[PodInfo]] | None,
    reservations: Mapping[str, HeldReservation] | None,
    pre_allocated: Mapping[str, Sequence[PodInfo]] | None = None,
) -> NodeInfo:
    """`Framework.node_view` with the pod's nominated Reservations (and pre-allocated pods) read
    once per cycle."""
    nominated = ahead.get(info.name) if ahead else None
    held = reservations.get(info.name) if reservations else None
    taken = pre_allocated.get(info.name) if pre_allocated else None
    if not nominated and held is None and not taken:
        return info
    gone = [held.uid] if held is not None else []
    gone += [p.ident for p in taken or () if p.ident in info.pods]
    return info.simulate(remove=gone, add=nominated or ())


def _run_chain(
    filters: Sequence[Callable[[CycleState, PodInfo, NodeInfo], Status]],
    state: CycleState,
    pod: PodInfo,
    node: NodeInfo,
) -> Status:
    """The first rejection, or the SUCCESS constant itself (callers compare by identity)."""
    for check in filters:
        status = check(state, pod, node)
        if status.code is not Code.SUCCESS:
            return status
    return SUCCESS


def _with_plugin(status: Status, plugin: str) -> Status:
    if status.plugin:
        return status
    return Status(status.code, status.reasons, plugin, status.shortfalls, status.timeout)


def _plugin_in_traceback(tb: types.TracebackType | None) -> str:
    """The innermost plugin whose method was running when an exception was raised."""
    found = ""
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, Plugin):
            found = owner.name
        tb = tb.tb_next
    return found
