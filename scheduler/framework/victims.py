"""Kube's preemption algorithm, once, for every PostFilter that preempts.

DefaultPreemption (any lower-priority pod in the cluster) and ElasticQuota (lower-priority pods
of the preemptor's own quota) differ only in who the potential victims are and in what must fit
besides the node (the quota's admission); both give `VictimFinder.find` a `Scope` saying so.
The steps, as kube-scheduler's `preemption.Evaluator` takes them:

- **Who preempts**: not a pod whose `preemptionPolicy` is `Never`, nor one whose earlier
  preemption is still under way — victims chosen for it (by any preempting plugin of the
  profile: `ChosenVictims` is shared) not gone yet, or lower-priority pods of its scope still
  terminating on the node it is nominated to (after a restart that is all that says so).
- **Victims** on a node: bound pods (not assumed: a pod being bound is not evicted) of strictly
  lower priority, in the scope, not being deleted, not already chosen for another preemption.
  A Reservation's reserve pod never is, whatever the priority its template gives it (its
  default is the highest; Koordinator does not preempt Reservations either); nor, for a pod
  that is not its owner, an owner of a Reservation owners share (`allocateOnce: false`): what
  that owner holds goes back to the Reservation, not to the preemptor.
  Nodes whose Filter rejection was UnschedulableAndUnresolvable are skipped: evicting pods
  cannot cure a taint or an affinity.
- **Per node**, every potential victim is removed — on a copy of the node (`NodeInfo.simulate`),
  with the pods nominated there ahead of the preemptor added — and the pod must fit: the
  profile's own Filter chain on the copy (device shares included) and the scope's own check.
  A node where it does not fit even so is no candidate. Then victims are reprieved, highest
  priority first, as long as the pod still fits without evicting them: first those whose
  eviction would break a PodDisruptionBudget (the budget covers them and its
  `status.disruptionsAllowed` is used up), then the others; the ones that stay count as
  violations.
- **The node** is the candidate with the fewest budget violations, then the smallest highest
  victim priority, then the smallest sum of priorities, then the fewest victims, then the name
  (kube's last tie-break, the latest start time, needs `status.startTime`, which Tessera's Pod
  does not carry).

Pure: a decision, written by the plugin into `CycleState.preemption`; the live scheduler evicts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from apis.k8s.core import Pod
from apis.k8s.policy import PodDisruptionBudget
from scheduler.cache import ClusterCache, NodeInfo, PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import NodeCheck
from scheduler.framework.status import Code, Status

__all__ = [
    "CHOSEN_VICTIMS",
    "EVICTION_PATIENCE",
    "NOT_HELPFUL",
    "NO_VICTIMS",
    "PREEMPT_NEVER",
    "Candidate",
    "ChosenVictims",
    "Scope",
    "Search",
    "VictimFinder",
    "budget_violations",
]

#: spec.preemptionPolicy of a pod that never preempts others.
PREEMPT_NEVER: Final = "Never"
#: Seconds a preemptor waits for its victims to go before they may be chosen again: kube's
#: default termination grace period (30 s) twice over.
EVICTION_PATIENCE: Final = 60.0
#: The key under which a profile's `ChosenVictims` sits in `Handle.shared`: every preempting
#: plugin of the profile reads the same one, so two of them never act for one pod at once.
CHOSEN_VICTIMS: Final = "scheduler.framework.victims.ChosenVictims"

#: kube-scheduler's per-node reasons when preemption finds nothing there.
NOT_HELPFUL: Final = "Preemption is not helpful for scheduling"
NO_VICTIMS: Final = "No preemption victims found for incoming pod"


class ChosenVictims:
    """Victims of preemptions decided, until they leave the cache, so two cycles never count the
    same eviction twice — or until `patience` seconds passed: an eviction that failed (or a
    victim that never goes) must not keep its preemptor waiting for ever. A victim still
    terminating then is no candidate anyway (it is being deleted); one that is not may be
    chosen, and evicted, again."""

    def __init__(self, *, patience: float = EVICTION_PATIENCE, clock: Callable[[], float] = time.monotonic) -> None:
        self._patience = patience
        self._clock = clock
        #: victim ident -> (ident of the pod it makes room for, when it was chosen)
        self._chosen: dict[str, tuple[str, float]] = {}

    def __contains__(self, ident: object) -> bool:
        return ident in self._chosen

    def choose(self, preemptor: str, victims: Sequence[PodInfo]) -> None:
        now = self._clock()
        self._chosen.update((v.ident, (preemptor, now)) for v in victims)

    def awaited_by(self, preemptor: str) -> int:
        """How many victims chosen for `preemptor` are not gone yet."""
        return sum(1 for p, _ in self._chosen.values() if p == preemptor)

    def forget_gone(self, cache: ClusterCache) -> None:
        """Victims no longer in the cache are gone; those chosen longer than `patience` ago are
        forgotten too (class doc)."""
        since = self._clock() - self._patience
        for ident in [v for v, (_, at) in self._chosen.items() if at < since or cache.pod_node(v) is None]:
            del self._chosen[ident]


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: tuple[PodInfo, ...]
    #: Victims whose eviction breaks a PodDisruptionBudget (all others were reprieved).
    violations: int = 0

    @property
    def rank(self) -> tuple[int, int, int, int, str]:
        """Lower is better: budget violations, highest victim priority, sum of priorities,
        count, node name."""
        priorities = [v.pod.priority for v in self.victims]
        return self.violations, max(priorities), sum(priorities), len(priorities), self.node


@dataclass(frozen=True, slots=True)
class Scope:
    """Who may be evicted for one preemptor, and what must fit besides the node."""

    #: Words for messages ("quota team-a"); "" for the whole cluster.
    label: str
    #: Whether a lower-priority pod may be a victim at all (its quota, its preemptible label).
    may_evict: Callable[[Pod], bool] = lambda _pod: True
    #: Whether a lower-priority pod terminating on the preemptor's nominated node is one of its
    #: earlier victims (the preemptor then waits).
    awaits: Callable[[Pod], bool] = lambda _pod: True
    #: With these pods gone, "" when the scope admits the preemptor, else why not (the quota).
    admits: Callable[[Sequence[Pod]], str] = lambda _gone: ""
    #: Prepares the dry run's cycle state (ElasticQuota leaves its own PreFilter check to `admits`).
    prepare: Callable[[CycleState], None] = lambda _state: None
    budgets: Sequence[PodDisruptionBudget] = ()


@dataclass(frozen=True, slots=True)
class Search:
    """What `VictimFinder.find` found: a candidate, or why not."""

    candidate: Candidate | None = None
    #: Why the pod may not preempt at all now (policy Never, waiting for earlier victims).
    blocked: str = ""
    #: Node -> why it is no candidate, for nodes that were tried or skipped.
    nodes: Mapping[str, str] = field(default_factory=dict)
    #: Whether any node had a potential victim.
    found_any: bool = False


def budget_violations(victims: Sequence[PodInfo], budgets: Sequence[PodDisruptionBudget]) -> set[str]:
    """Idents of the victims whose eviction would break a budget, evicting all of `victims` in
    their order: each covering budget spends one allowed disruption per victim (none for a pod
    it already lists as disrupted), and a victim that takes one below zero violates it."""
    if not budgets:
        return set()
    allowed = [b.disruptions_allowed for b in budgets]
    violating: set[str] = set()
    for victim in victims:
        pod = victim.pod
        if not pod.labels:
            continue
        for i, budget in enumerate(budgets):
            if not budget.covers(pod.namespace, pod.labels) or pod.name in budget.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                violating.add(victim.ident)
    return violating


class VictimFinder:
    """Finds the best candidate node and its victims for one pod, within a `Scope`."""

    def __init__(self, cache: ClusterCache, check: NodeCheck, chosen: ChosenVictims) -> None:
        self._cache = cache
        self._check = check
        self.chosen = chosen

    def find(self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status], scope: Scope) -> Search:
        self.chosen.forget_gone(self._cache)
        if pod.pod.preemption_policy == PREEMPT_NEVER:
            return Search(blocked="not eligible due to preemptionPolicy=Never")
        waiting = self.chosen.awaited_by(pod.ident) or self._terminating(pod, scope)
        if waiting:
            of = f" of {scope.label}" if scope.label else ""
            return Search(blocked=f"waiting for {waiting} preempted pod(s){of} to go")
        # Potential victims first: without any (equal priorities, the common case) nothing else
        # is worth running, not even the PreFilter dry run.
        potentials = [(node, self._potential_victims(pod, node, scope)) for node in self._cache.nodes()]
        if not any(victims for _, victims in potentials):
            return Search()
        dry = state.clone()
        dry.dry_run = True
        scope.prepare(dry)
        node_filter = self._check.filter
        if not self._check.pre_filter(dry, pod).is_success:
            return Search()
        ahead = self._cache.nominator.ahead_of(pod) if self._cache.nominator else {}
        candidates: list[Candidate] = []
        why: dict[str, str] = {}
        for node, found in potentials:
            status = statuses.get(node.name)
            if status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                why[node.name] = NOT_HELPFUL
                continue
            if not found:
                why[node.name] = NO_VICTIMS
                continue
            potential = sorted(found, key=lambda v: (-v.pod.priority, v.key))

            def fits(victims: Sequence[PodInfo], node: NodeInfo = node) -> str:
                refused = scope.admits([v.pod for v in victims])
                if refused:
                    return refused
                copy = node.simulate(remove=[v.ident for v in victims], add=ahead.get(node.name, ()))
                verdict = node_filter(dry, pod, copy)
                return "" if verdict.is_success else verdict.message or "does not fit"

            refused = fits(potential)
            if refused:
                why[node.name] = refused
                continue
            candidates.append(self._reprieve(node.name, potential, fits, scope.budgets))
        if not candidates:
            return Search(nodes=why, found_any=True)
        best = min(candidates, key=lambda c: c.rank)
        if not state.dry_run:
            self.chosen.choose(pod.ident, best.victims)
        return Search(best, nodes=why, found_any=True)

    @staticmethod
    def _reprieve(
        node: str,
        potential: Sequence[PodInfo],
        fits: Callable[[Sequence[PodInfo]], str],
        budgets: Sequence[PodDisruptionBudget],
    ) -> Candidate:
        """Keep every victim the pod fits without: those protected by a budget first."""
        violating = budget_violations(potential, budgets)
        victims = list(potential)
        protected = [v for v in potential if v.ident in violating]
        others = [v for v in potential if v.ident not in violating]
        for victim in (*protected, *others):
            trial = [v for v in victims if v is not victim]
            if not fits(trial):
                victims = trial
        violations = sum(1 for v in victims if v.ident in violating)
        return Candidate(node, tuple(sorted(victims, key=lambda v: v.key)), violations)

    def _terminating(self, pod: PodInfo, scope: Scope) -> int:
        """Lower-priority pods of the scope being deleted on the node the pod is nominated to:
        victims of its earlier preemption still going (kube and Koordinator do not preempt
        again meanwhile)."""
        nominated = self._cache.nominator.node_of(pod.ident) or pod.pod.nominated_node_name
        node = self._cache.node(nominated) if nominated else None
        if node is None:
            return 0
        priority = pod.pod.priority
        return sum(
            1
            for victim in node.pods.values()
            if victim.pod.is_deleting and victim.pod.priority < priority and scope.awaits(victim.pod)
        )

    def _potential_victims(self, pod: PodInfo, node: NodeInfo, scope: Scope) -> list[PodInfo]:
        priority = pod.pod.priority
        return [
            victim
            for ident, victim in node.pods.items()
            if victim.pod.priority < priority
            and not victim.pod.is_deleting
            and ident not in self.chosen
            and not self._cache.is_assumed(ident)
            and not self._cache.is_reservation(ident)
            and not self._returns_to_reservation(ident, pod)
            and scope.may_evict(victim.pod)
        ]

    def _returns_to_reservation(self, ident: str, preemptor: PodInfo) -> bool:
        """Whether what the pod `ident` holds would go back to a Reservation its owners share
        that `preemptor` is no owner of (evicting it would not make room for the preemptor)."""
        consumed = self._cache.consumed_reservation(ident)
        reservation = self._cache.reservation(consumed) if consumed is not None else None
        return (
            reservation is not None and not reservation.allocate_once and not reservation.matches_owner(preemptor.pod)
        )
