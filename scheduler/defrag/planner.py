"""The defragmentation planner: the fewest bound pods to move so that a pending pod fits.

Fractional pods scatter over GPUs; a pod asking for whole GPUs then fits nowhere although the
cluster has plenty idle. `plan` finds a node that a few migrations free, and where each moved pod
goes, with the scheduler's own code:

1. A pod that fits already needs no plan (`feasible`, no migrations).
2. Per node, the cheapest victims (greedy): first the busy GPUs cheapest to empty (fewest pods
   that may move, then the smallest shares — `candidates`), as many as the pending pod's whole
   GPUs lack; then, while the profile's Filters still reject the pending pod on the node without
   the victims (`NodeInfo.simulate`), one more pod or GPU at a time, up to `max_migrations`.
   A GPU held by a pod that may not move is never emptied.
3. Nodes are tried cheapest first. For a node's victims, each one's replacement is scheduled in
   turn by the same `Scheduler.schedule_one` (the largest first; required to avoid the node being
   freed) while the victim still runs — as a ReservationFirst migration does — and the victim is
   removed only once its replacement has a place. A victim with nowhere to go rules the node
   out. Then the pending pod must pass the Filters on the freed node.
4. The plan is the node with the fewest moves (then the least GPU moved). The search stops when
   no untried node can beat it, and after `max_nodes` nodes / `max_targets` placement tries.

The planner works on the `Scheduler` it is given: when it finds a plan it leaves the migrations
done in that scheduler's cache (replacements placed, victims gone: the simulator goes on from
there); otherwise the cache is as it was. The live scheduler plans on a copy of its cache.
Pure and deterministic (the scheduler's seeded tie-breaks), no I/O.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from apis.crds.device import DeviceType
from apis.extension import names
from apis.k8s.core import NodeAffinity, Pod
from scheduler.cache import ClusterCache, NodeInfo, PodInfo
from scheduler.core import Scheduler
from scheduler.defrag.candidates import Candidate, Refusal, gpu_percent, refusal
from scheduler.defrag.plan import Migration, MigrationPlan, PlanOptions
from scheduler.framework import CycleState, Framework

__all__ = ["plan"]

log = logging.getLogger(__name__)

#: Appended to a moved pod's UID for its replacement (unique, and readable in the cache).
_MOVED = "/moved"


class _Why:
    """Why a node could not be freed (for the message of an infeasible plan)."""

    BLOCKED = "pods that may not move hold the GPUs it would need"
    TOO_FEW = "too few GPUs"
    UNKNOWN = "holds devices of unknown pods"
    NO_FIT = "the pod does not fit there even with every movable pod gone"
    TOO_MANY = "needs more migrations than allowed"
    NOWHERE = "a pod that would move has nowhere else to go"


@dataclass(frozen=True, slots=True)
class _Victims:
    """A node's victims and what moving them costs: fewer pods, then less GPU, then less CPU."""

    node: str
    pods: tuple[Candidate, ...]

    @property
    def key(self) -> tuple[int, int, int]:
        return (
            len(self.pods),
            sum(c.gpu_percent for c in self.pods),
            sum(c.milli_cpu for c in self.pods),
        )


@dataclass(frozen=True, slots=True)
class _Moved:
    """One migration done in the cache: the replacement as bound, and the pod it replaced."""

    replacement: Pod
    victim: Candidate


def plan(
    scheduler: Scheduler,
    pod: Pod,
    options: PlanOptions | None = None,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> MigrationPlan:
    """The fewest migrations after which `pod` (pending, not in the cache) fits; see the module
    docstring. Never raises for a pod that cannot be helped: the plan says why."""
    options = options if options is not None else PlanOptions()
    start = clock()
    result = _Search(scheduler, pod, options).run()
    return dataclasses.replace(result, seconds=clock() - start)


class _Search:
    def __init__(self, scheduler: Scheduler, pod: Pod, options: PlanOptions) -> None:
        self.scheduler = scheduler
        self.cache: ClusterCache = scheduler.cache
        self.pod = pod
        self.info = PodInfo.of(pod)
        self.options = options
        self.why: Counter[str] = Counter()
        self.examined = 0
        self.tried = 0
        #: Victim shape -> whether its replacement fits elsewhere now (see `_placeable`).
        self._placeable_memo: dict[Hashable, bool] = {}

    def _plan(
        self,
        feasible: bool,
        message: str,
        *,
        node: str | None = None,
        migrations: tuple[Migration, ...] = (),
        freed_gpus: int = 0,
    ) -> MigrationPlan:
        return MigrationPlan(
            self.pod.key,
            feasible,
            node,
            migrations,
            message,
            nodes_examined=self.examined,
            targets_tried=self.tried,
            freed_gpus=freed_gpus,
        )

    def run(self) -> MigrationPlan:
        key = self.pod.key
        framework = self.scheduler.framework_for(self.pod)
        if framework is None:
            return self._plan(False, f"pod {key}: schedulerName {self.pod.scheduler_name} is not served here")
        ident = self.info.ident
        if self.cache.pod_node(ident) is not None:
            return self._plan(False, f"pod {key} is already on node {self.cache.pod_node(ident)}: nothing to plan")
        now = framework.schedule(CycleState(dry_run=True), self.info, diagnose=False)
        if now.node is not None:
            return self._plan(True, f"pod {key} fits on {now.node} now: nothing to move", node=now.node)
        if now.diagnosis.pre_filter_status is not None:
            return self._plan(False, f"pod {key} cannot be helped by moving pods: {now.status.message}")
        state = CycleState(dry_run=True)
        _, status = framework.run_pre_filter(state, self.info)
        if not status.is_success:
            return self._plan(False, f"pod {key} cannot be helped by moving pods: {status.message}")
        movable, refused = self._candidates()
        best: tuple[_Victims, tuple[_Moved, ...]] | None = None
        for estimate, node in self._nodes_by_estimate(movable):
            if best is not None and estimate >= best[0].key:
                break  # nodes are sorted by a lower bound of their cost: none left can do better
            if self.examined >= self.options.max_nodes or self.tried >= self.options.max_targets:
                break
            self.examined += 1
            victims = self._victims(framework, state, node, movable)
            if victims is None or (best is not None and victims.key >= best[0].key):
                continue
            self.tried += 1
            moved = self._try(framework, victims)
            if moved is not None:
                best = (victims, moved)
        if best is None:
            return self._plan(False, self._infeasible_message(refused))
        victims, moved = best
        self._redo(moved)
        target = victims.node
        migrations = tuple(
            Migration(
                m.victim.info.key,
                m.victim.info.pod.uid,
                target,
                m.replacement.node_name,
                m.victim.gpu_percent,
            )
            for m in moved
        )
        freed = _free_gpus(self.cache.node(target))
        moves = ", ".join(f"{m.pod} → {m.to_node}" for m in migrations)
        message = (
            f"pod {key} fits on {target} after {len(migrations)} migration{'s' if len(migrations) != 1 else ''} "
            f"({moves}), which leave {freed} GPU{'s' if freed != 1 else ''} free there"
        )
        log.log(logging.INFO - 4, "Planned migrations", extra={"pod": key, "node": target, "moves": len(migrations)})
        return self._plan(True, message, node=target, migrations=migrations, freed_gpus=freed)

    # --- who may move --------------------------------------------------------------------------------
    def _candidates(self) -> tuple[dict[str, Candidate], Counter[str]]:
        """Movable pods by ident; how many pods each refusal kept in place."""
        movable: dict[str, Candidate] = {}
        refused: Counter[str] = Counter()
        exclude = self.options.exclude

        def served(p: Pod) -> bool:
            return self.scheduler.framework_for(p) is not None

        for node in self.cache.nodes():
            for ident, info in node.pods.items():
                if self.cache.is_assumed(ident):
                    refused[Refusal.IN_FLIGHT] += 1
                    continue
                why = refusal(info, self.pod, exclude=exclude, served=served)
                if why is not None:
                    refused[why] += 1
                    continue
                movable[ident] = Candidate(info, gpu_percent(info), info.requests.get(names.CPU, 0))
        return movable, refused

    # --- per node: the cheapest victims --------------------------------------------------------------
    def _whole_gpus(self) -> int:
        """Whole GPUs the pending pod asks for (0 for a share of one, or none)."""
        request = self.info.device_requests.get(DeviceType.GPU)
        if request is None or request.per_device.get(names.GPU_CORE, 0) < 100:
            return 0
        return request.count

    def _nodes_by_estimate(self, movable: Mapping[str, Candidate]) -> list[tuple[tuple[int, int, int], NodeInfo]]:
        """Nodes with the cost of emptying the GPUs the pod lacks there (a lower bound of the cost
        of freeing the node), cheapest first; nodes that cannot give enough GPUs are left out."""
        need = self._whole_gpus()
        out = []
        for node in self.cache.nodes():
            units = _gpu_units(node, movable)
            if units is None:
                self.why[_Why.UNKNOWN] += 1
                continue
            free, busy, blocked = units
            lacking = max(need - free, 0)
            if lacking > len(busy):
                self.why[_Why.BLOCKED if free + len(busy) + blocked >= need else _Why.TOO_FEW] += 1
                continue
            chosen = _pick(busy, lacking, movable, set())
            out.append((_Victims(node.name, tuple(chosen)).key, node))
        out.sort(key=lambda pair: (pair[0], pair[1].name))
        return out

    def _victims(
        self, framework: Framework, state: CycleState, node: NodeInfo, movable: Mapping[str, Candidate]
    ) -> _Victims | None:
        """The greedy victims of one node (see the module docstring), or None (reason counted).
        Only pods whose replacement fits on some other node now are chosen."""
        units = _gpu_units(node, movable)
        assert units is not None  # _nodes_by_estimate left such nodes out
        free, busy, _ = units
        everyone = [ident for ident in node.pods if ident in movable]
        placeable = {ident for ident in everyone if self._placeable(movable[ident], node.name)}
        usable = [unit for unit in busy if unit <= placeable]
        lacking = max(self._whole_gpus() - free, 0)
        if lacking > len(usable) or not self._fits(framework, state, node, placeable):
            nowhere = placeable != set(everyone) and self._fits(framework, state, node, everyone)
            self.why[_Why.NOWHERE if nowhere or lacking > len(usable) else _Why.NO_FIT] += 1
            return None
        chosen: set[str] = set()
        picked = list(_pick(usable, lacking, movable, chosen))
        pods_alone = [frozenset((ident,)) for ident in sorted(placeable)]
        limit = self.options.max_migrations
        while len(chosen) <= limit:
            if self._fits(framework, state, node, chosen):
                return _Victims(node.name, tuple(sorted(picked, key=lambda c: c.info.key)))
            more = _pick([*usable, *pods_alone], 1, movable, chosen)
            if not more:
                break
            picked.extend(more)
        self.why[_Why.TOO_MANY] += 1
        return None

    def _placeable(self, victim: Candidate, node: str) -> bool:
        """Whether the victim's replacement fits on another node as the cluster is now (a dry
        run). Remembered per shape for the search (the cluster is the same for every node
        tried): a shape that fits only on the node being freed is caught by `_try`."""
        records = self.cache.holdings.annotations
        shape = _shape(victim.info, records)
        known = self._placeable_memo.get(shape)
        if known is None:
            replacement = PodInfo.of(_replacement(victim.info.pod, avoid=node, records=records))
            framework = self.scheduler.framework_for(replacement.pod)
            found = framework is not None and framework.schedule(CycleState(dry_run=True), replacement, diagnose=False)
            known = self._placeable_memo[shape] = bool(found and found.node is not None)
        return known

    def _fits(self, framework: Framework, state: CycleState, node: NodeInfo, without: Iterable[str]) -> bool:
        return framework.run_filters(state, self.info, node.simulate(remove=without)).is_success

    # --- where the victims go ------------------------------------------------------------------------
    def _try(self, framework: Framework, victims: _Victims) -> tuple[_Moved, ...] | None:
        """Move the victims one by one in the cache; whether the pending pod then fits on their
        node. Always undone: the moves are returned to be redone for the chosen plan."""
        moved: list[_Moved] = []
        target = victims.node
        ok = True
        for victim in sorted(victims.pods, key=lambda c: (-c.gpu_percent, -c.milli_cpu, c.info.key)):
            replacement = _replacement(victim.info.pod, avoid=target, records=self.cache.holdings.annotations)
            outcome = self.scheduler.schedule_one(replacement, diagnose=False)
            if not outcome.scheduled:
                self.why[_Why.NOWHERE] += 1
                ok = False
                break
            bound = self.cache.pod_info(replacement.uid)
            assert bound is not None  # just bound in memory
            moved.append(_Moved(bound.pod, victim))
            self.cache.remove_pod(victim.info.pod)
        if ok:
            node = self.cache.node(target)
            state = CycleState(dry_run=True)
            _, status = framework.run_pre_filter(state, self.info)
            ok = node is not None and status.is_success and framework.run_filters(state, self.info, node).is_success
            if not ok:
                self.why[_Why.NO_FIT] += 1
        self._undo(moved)
        return tuple(moved) if ok else None

    def _undo(self, moved: Sequence[_Moved]) -> None:
        for m in reversed(moved):
            self.cache.remove_pod(m.replacement)
            self.cache.add_pod(m.victim.info.pod)

    def _redo(self, moved: Sequence[_Moved]) -> None:
        for m in moved:
            self.cache.add_pod(m.replacement)
            self.cache.remove_pod(m.victim.info.pod)

    def _infeasible_message(self, refused: Counter[str]) -> str:
        parts = [f"{n} node{'s' if n != 1 else ''}: {why}" for why, n in self.why.most_common()]
        if not parts:
            parts = ["no node has enough GPUs"]
        kept = ", ".join(f"{n} {why}" for why, n in refused.most_common())
        tail = f" (pods kept in place: {kept})" if kept else ""
        return (
            f"no plan of at most {self.options.max_migrations} migrations makes room for pod {self.pod.key}: "
            + "; ".join(parts)
            + tail
        )


def _gpu_units(node: NodeInfo, movable: Mapping[str, Candidate]) -> tuple[int, list[frozenset[str]], int] | None:
    """(healthy GPUs free, the holders of each busy GPU that only movable pods hold, how many GPUs
    a pod that may not move holds); None when some holder's devices are unknown."""
    devices = node.devices
    if devices.has_unknown():
        return None
    holders: dict[int, set[str]] = {}
    for holding in devices.holdings.values():
        for alloc in holding.allocations.get(DeviceType.GPU, ()):
            holders.setdefault(alloc.minor, set()).add(holding.ident)
    free = blocked = 0
    busy = []
    for gpu in devices.states(DeviceType.GPU):
        if not gpu.healthy:
            continue
        held = holders.get(gpu.minor)
        if not held:
            free += 1
        elif all(ident in movable for ident in held):
            busy.append(frozenset(held))
        else:
            blocked += 1
    return free, busy, blocked


def _pick(
    units: Sequence[frozenset[str]], count: int, movable: Mapping[str, Candidate], chosen: set[str]
) -> list[Candidate]:
    """Greedily take `count` units (sets of pods to move together), each time the one adding the
    least (pods, GPU share, CPU) to `chosen`; `chosen` grows. Returns the pods added."""
    added: list[Candidate] = []
    left = [u for u in units if not u <= chosen]
    for _ in range(count):
        if not left:
            break

        def extra(unit: frozenset[str]) -> tuple[int, int, int, tuple[str, ...]]:
            new = unit - chosen
            return (
                len(new),
                sum(movable[i].gpu_percent for i in new),
                sum(movable[i].milli_cpu for i in new),
                tuple(sorted(new)),
            )

        best = min(left, key=extra)
        new = best - chosen
        chosen.update(new)
        added.extend(movable[i] for i in sorted(new))
        left = [u for u in left if not u <= chosen]
    return added


def _free_gpus(node: NodeInfo | None) -> int:
    if node is None:
        return 0
    held = {a.minor for h in node.devices.holdings.values() for a in h.allocations.get(DeviceType.GPU, ())}
    return sum(1 for gpu in node.devices.states(DeviceType.GPU) if gpu.healthy and gpu.minor not in held)


def _shape(info: PodInfo, records: frozenset[str]) -> Hashable:
    """What decides where a pod may go: two pods of one shape fit the same nodes (the records of
    what it holds, `records`, left out)."""
    pod = info.pod
    annotations = frozenset((k, v) for k, v in pod.annotations.items() if k not in records)
    return (
        pod.scheduler_name,
        pod.priority,
        frozenset(info.requests.items()),
        frozenset(pod.node_selector.items()),
        pod.node_affinity,
        pod.tolerations,
        annotations,
    )


def _replacement(pod: Pod, *, avoid: str, records: frozenset[str]) -> Pod:
    """The pod its controller would create after an eviction, as pending: no node, none of the
    records of what it holds the scheduler wrote (`records`: the cache's holdings annotations), a
    UID of its own, and kept off the node being freed."""
    annotations = {k: v for k, v in pod.annotations.items() if k not in records}
    meta = dataclasses.replace(pod.meta, uid=f"{pod.uid or pod.key}{_MOVED}", annotations=annotations)
    return dataclasses.replace(
        pod,
        meta=meta,
        node_name="",
        phase="Pending",
        conditions=(),
        nominated_node_name="",
        node_affinity=NodeAffinity.excluding(pod.node_affinity, avoid),
    )
