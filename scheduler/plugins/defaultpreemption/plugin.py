"""DefaultPreemption: when no node fits a pod, evict lower-priority pods so it does (kube's plugin).

PostFilter, after every other PostFilter of the profile (`PostFilterPlugin.runs_last`): a
quota's own preemption (ElasticQuota) or a gang's decision comes first, and the first that
makes room wins. Kube's algorithm (`scheduler.framework.victims`) over the whole cluster: any
bound pod of strictly lower priority may be a victim; PodDisruptionBudgets (from the cache,
fed by the scheduler's PDB informer or `tessera what-if`) are honoured as kube does — victims
they protect are reprieved first, and the node whose victims break the fewest budgets wins.
The profile's own PreFilter runs in the dry run, so a pod its quota refuses preempts nobody
here (quota room is ElasticQuota's to make, inside the quota).

It only decides: the nominated node and the victims go back in the cycle state
(`CycleState.preemption`), and the live scheduler nominates the pod and deletes the victims.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from scheduler.cache import ClusterCache, PodInfo
from scheduler.framework import config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import Diagnosis
from scheduler.framework.interfaces import Handle, PostFilterPlugin
from scheduler.framework.preemption import Preemption
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.victims import CHOSEN_VICTIMS, ChosenVictims, Scope, Search, VictimFinder
from scheduler.plugins.defaultpreemption import reasons

NAME = "DefaultPreemption"

log = logging.getLogger(__name__)


class DefaultPreemption(PostFilterPlugin):
    name = NAME
    runs_last = True

    def __init__(self, cache: ClusterCache, finder: VictimFinder) -> None:
        self._cache = cache
        self._finder = finder

    def post_filter(self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]) -> tuple[str | None, Status]:
        search = self._finder.find(state, pod, statuses, Scope(label="", budgets=self._cache.budgets.list()))
        best = search.candidate
        if best is None:
            return None, self._failure(search)
        state.preemption = Preemption(best.node, best.victims, NAME, reasons.ROOM_FOR)
        if not state.dry_run:
            extra = {
                "pod": pod.key,
                "priority": pod.pod.priority,
                "node": best.node,
                "victims": ",".join(v.key for v in best.victims),
                "pdb_violations": best.violations,
            }
            log.info("Preempting lower-priority pods", extra=extra)
        return best.node, SUCCESS

    def _failure(self, search: Search) -> Status:
        """kube's message (`preemption: 0/3 nodes are available: …`), or the sentence saying why
        the pod may not preempt now. Nothing at all when no lower-priority pod exists anywhere:
        the common case of equal priorities, where the Filter reasons say everything."""
        if search.blocked:
            return Status.unschedulable(reasons.PREFIX + search.blocked + ".", plugin=NAME)
        if not search.found_any:
            return Status.unschedulable()
        per_node = {node: Status.unschedulable(why) for node, why in search.nodes.items()}
        summary = Diagnosis(node_statuses=per_node).summary(len(self._cache.nodes()))
        return Status.unschedulable(reasons.PREFIX + summary, plugin=NAME)


def new(args: Mapping[str, object] | None, handle: Handle) -> DefaultPreemption:
    config.expect_no_args(NAME, args)
    chosen = handle.shared_object(CHOSEN_VICTIMS, ChosenVictims, ChosenVictims)
    return DefaultPreemption(handle.cache, VictimFinder(handle.cache, handle.check, chosen))
