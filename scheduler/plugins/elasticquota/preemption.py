"""Preemption inside one quota: kube's algorithm (`scheduler.framework.victims`) in its scope.

Koordinator's ElasticQuota PostFilter:

- **Who preempts**: a pod of an ElasticQuota, unless its `preemptionPolicy` is `Never` or pods
  of its quota of lower priority are still terminating on the node it is nominated to (its last
  preemption is still under way), or victims chosen for it are not gone yet.
- **Victims** are pods of the preemptor's own quota only, of lower priority, preemptible
  (`quota.scheduling.koordinator.sh/preemptible` is not "false"), bound, not being deleted, not
  already chosen for another preemption.
- **Per node**, every such pod on it is removed — on a copy of the node and from the quota's
  used for the check only — and the pod must then fit both its quota (`used - victims + request
  ≤ runtime`, and min for a non-preemptible pod, with the pods of the quota already nominated
  ahead of it counted in used) and the node; then victims are reprieved, highest priority first
  (those a PodDisruptionBudget protects first), as long as it still fits.
- **The node** is the candidate whose victims break the fewest budgets and are the fewest and
  lowest (`victims.Candidate.rank`).

Pure: the decision only; the live scheduler evicts (see `Preemption`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from apis.extension import quota as quota_labels
from apis.k8s.core import Pod
from kube.quotas import QuotaManager
from scheduler.cache import ClusterCache, PodInfo
from scheduler.framework.cycle_state import CycleState, StateData
from scheduler.framework.interfaces import NodeCheck
from scheduler.framework.status import Status
from scheduler.framework.victims import EVICTION_PATIENCE, Candidate, ChosenVictims, Scope
from scheduler.framework.victims import VictimFinder as KubeVictimFinder

__all__ = ["EVICTION_PATIENCE", "PREEMPTING", "Candidate", "Preempting", "VictimFinder"]

#: The cycle-state key under which a preemption's dry run tells PreFilter to leave the quota
#: check to the preemption (which checks it per node, with that node's victims gone).
PREEMPTING = "ElasticQuota/preempting"


class Preempting(StateData):
    """The marker under `PREEMPTING`."""


def _mark(state: CycleState) -> None:
    state.write(PREEMPTING, Preempting())


class VictimFinder:
    """The best candidate inside the pod's quota. `chosen` is the profile's shared memory of
    victims (`victims.CHOSEN_VICTIMS`); a finder of its own when not given."""

    def __init__(
        self,
        cache: ClusterCache,
        manager: QuotaManager,
        check: NodeCheck,
        *,
        patience: float = EVICTION_PATIENCE,
        clock: Callable[[], float] = time.monotonic,
        chosen: ChosenVictims | None = None,
    ) -> None:
        self._cache = cache
        self._manager = manager
        memory = chosen if chosen is not None else ChosenVictims(patience=patience, clock=clock)
        self._finder = KubeVictimFinder(cache, check, memory)

    def find(self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]) -> tuple[Candidate | None, str]:
        """The best candidate, or None and why not ("" when nothing worth saying: no victim
        exists anywhere)."""
        quota = self._manager.quota_of(pod.pod)
        if not self._manager.has_quota(quota):
            return None, ""
        search = self._finder.find(state, pod, statuses, self._scope(pod, quota))
        if search.candidate is not None or search.blocked:
            return search.candidate, search.blocked
        if search.found_any:
            return None, f"evicting lower-priority pods of quota {quota} would not make room on any node"
        return None, ""

    def _scope(self, pod: PodInfo, quota: str) -> Scope:
        manager = self._manager
        ahead = self._cache.nominator.ahead_of(pod) if self._cache.nominator else {}
        ahead_pods = [p.pod for pods in ahead.values() for p in pods]

        def of_quota(other: Pod) -> bool:
            return manager.quota_of(other) == quota

        def admits(gone: Sequence[Pod]) -> str:
            verdict = manager.admit(pod.pod, pod.requests, without=gone, ahead=ahead_pods)
            return "" if verdict.admitted else verdict.message or "the quota does not admit it"

        return Scope(
            label=f"quota {quota}",
            may_evict=lambda other: of_quota(other) and quota_labels.is_preemptible(other),
            awaits=of_quota,
            admits=admits,
            prepare=_mark,
            budgets=self._cache.budgets.list(),
        )
