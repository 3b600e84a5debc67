"""Preemption inside one quota: which pods to evict, and on which node, so a pod fits.

Koordinator's ElasticQuota PostFilter, on kube's default preemption algorithm:

- **Who preempts**: a pod of an ElasticQuota, unless its `preemptionPolicy` is `Never` or pods
  of its quota of lower priority are still terminating on the node it is nominated to (its last
  preemption is still under way).
- **Victims** are pods of the preemptor's own quota only, of lower priority, preemptible
  (`quota.scheduling.koordinator.sh/preemptible` is not "false"), bound (not assumed: a pod being
  bound is not evicted), not already being deleted, and not already chosen for another
  preemption whose eviction is still under way.
- **Per node**, every such pod on it is removed — on a copy of the node (`NodeInfo.simulate`) and
  from the quota's used for the check only — and the pod must then fit both its quota (`used -
  victims + request ≤ runtime`, and min for a non-preemptible pod, with the pods of the quota
  already nominated ahead of it counted in used) and the node (the profile's own Filter chain on
  the copy, device share included, with the pods already nominated there ahead of it). A node
  where it does not fit even so is no candidate: nothing is evicted for a pod that could not run
  anyway. Then victims are reprieved, highest priority first, as long as the pod still fits
  without evicting them.
- **The node** is the candidate whose victims are the fewest and lowest: the smallest highest
  victim priority, then the smallest sum of priorities, then the fewest victims, then the name.

Pure: the decision only; the live scheduler evicts (see `Preemption`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from apis.extension import quota as quota_labels
from apis.quota import QuotaManager
from scheduler.cache import ClusterCache, NodeInfo, PodInfo
from scheduler.framework.cycle_state import CycleState, StateData
from scheduler.framework.interfaces import NodeCheck
from scheduler.framework.status import Code, Status

__all__ = ["EVICTION_PATIENCE", "PREEMPTING", "Candidate", "Preempting", "VictimFinder"]

#: spec.preemptionPolicy of a pod that never preempts others.
PREEMPT_NEVER = "Never"
#: Seconds a preemptor waits for its victims to go before they may be chosen again: kube's
#: default termination grace period (30 s) twice over.
EVICTION_PATIENCE = 60.0

#: The cycle-state key under which a preemption's dry run tells PreFilter to leave the quota
#: check to the preemption (which checks it per node, with that node's victims gone).
PREEMPTING = "ElasticQuota/preempting"


class Preempting(StateData):
    """The marker under `PREEMPTING`."""


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: tuple[PodInfo, ...]

    @property
    def rank(self) -> tuple[int, int, int, str]:
        """Lower is better: highest victim priority, sum of priorities, count, node name."""
        priorities = [v.pod.priority for v in self.victims]
        return max(priorities), sum(priorities), len(priorities), self.node


class VictimFinder:
    """Finds the best candidate for one pod; remembers the victims of its own choices until
    they leave the cache, so two cycles never count the same eviction twice — or until
    `patience` seconds passed: an eviction that failed (or a victim that never goes) must not
    keep its preemptor waiting for ever. A victim still terminating then is no candidate anyway
    (it is being deleted); one that is not may be chosen, and evicted, again."""

    def __init__(
        self,
        cache: ClusterCache,
        manager: QuotaManager,
        check: NodeCheck,
        *,
        patience: float = EVICTION_PATIENCE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cache = cache
        self._manager = manager
        self._check = check
        self._patience = patience
        self._clock = clock
        #: victim ident -> (ident of the pod it makes room for, when it was chosen)
        self._evicting: dict[str, tuple[str, float]] = {}

    def find(self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]) -> tuple[Candidate | None, str]:
        """The best candidate, or None and why not ("" when nothing worth saying: no victim
        exists anywhere)."""
        self._forget_gone()
        if pod.pod.preemption_policy == PREEMPT_NEVER:
            return None, ""
        quota = self._manager.quota_of(pod.pod)
        if not self._manager.has_quota(quota):
            return None, ""
        waiting = len([v for v, (p, _) in self._evicting.items() if p == pod.ident]) or self._terminating(pod, quota)
        if waiting:
            return None, f"waiting for {waiting} preempted pod(s) of quota {quota} to go"
        dry = state.clone()
        dry.dry_run = True
        dry.write(PREEMPTING, Preempting())
        pre_filter, node_filter = self._check.pre_filter, self._check.filter
        if pre_filter is None or node_filter is None or not pre_filter(dry, pod).is_success:
            return None, ""
        ahead = self._cache.nominator.ahead_of(pod) if self._cache.nominator else {}
        ahead_pods = [p.pod for pods in ahead.values() for p in pods]
        candidates: list[Candidate] = []
        found_any = False
        for node in self._cache.nodes():
            status = statuses.get(node.name)
            if status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                continue  # evicting pods cannot cure a taint or an affinity
            potential = self._potential_victims(pod, quota, node)
            if not potential:
                continue
            found_any = True

            def fits(victims: Sequence[PodInfo], node: NodeInfo = node) -> bool:
                gone = [v.pod for v in victims]
                if not self._manager.admit(pod.pod, pod.requests, without=gone, ahead=ahead_pods).admitted:
                    return False
                copy = node.simulate(remove=[v.ident for v in victims], add=ahead.get(node.name, ()))
                return node_filter(dry, pod, copy).is_success

            if not fits(potential):
                continue
            victims = list(potential)
            for victim in sorted(potential, key=lambda v: (-v.pod.priority, v.key)):
                trial = [v for v in victims if v is not victim]
                if fits(trial):
                    victims = trial
            candidates.append(Candidate(node.name, tuple(sorted(victims, key=lambda v: v.key))))
        if not candidates:
            why = f"evicting lower-priority pods of quota {quota} would not make room on any node" if found_any else ""
            return None, why
        best = min(candidates, key=lambda c: c.rank)
        if not state.dry_run:
            now = self._clock()
            self._evicting.update((v.ident, (pod.ident, now)) for v in best.victims)
        return best, ""

    def _terminating(self, pod: PodInfo, quota: str) -> int:
        """Pods of the quota, of lower priority, being deleted on the node the pod is nominated
        to: victims of its earlier preemption still going (kube and Koordinator do not preempt
        again meanwhile; after a restart this is all that says so)."""
        nominated = self._cache.nominator.node_of(pod.ident) or pod.pod.nominated_node_name
        node = self._cache.node(nominated) if nominated else None
        if node is None:
            return 0
        priority = pod.pod.priority
        return sum(
            1
            for victim in node.pods.values()
            if victim.pod.is_deleting and victim.pod.priority < priority and self._manager.quota_of(victim.pod) == quota
        )

    def _potential_victims(self, pod: PodInfo, quota: str, node: NodeInfo) -> list[PodInfo]:
        priority = pod.pod.priority
        out = []
        for ident, victim in node.pods.items():
            other = victim.pod
            if (
                other.priority < priority
                and quota_labels.is_preemptible(other)
                and not other.is_deleting
                and ident not in self._evicting
                and not self._cache.is_assumed(ident)
                and self._manager.quota_of(other) == quota
            ):
                out.append(victim)
        return out

    def _forget_gone(self) -> None:
        """Victims no longer in the cache are gone: their room is now the quota's (and the
        node's). Victims chosen longer than `patience` ago are forgotten too (class doc)."""
        since = self._clock() - self._patience
        for ident in [v for v, (_, at) in self._evicting.items() if at < since or self._cache.pod_node(v) is None]:
            del self._evicting[ident]
