"""ElasticQuota: Koordinator's multi-hierarchy elastic quota at admission.

PreFilter admits a pod when, in every resource its quota limits, `used + request ≤ runtime`
(a non-preemptible pod must also fit within min); otherwise the pod is Unschedulable with the
quota's numbers. Reserve counts the pod in its quota's used and Unreserve takes it out, so pods
assumed but not yet bound are never admitted twice over the same room. A pod with ResourceClaims
is charged what they allocate (`apis.dra.quota`), known only once DynamicResources allocated them
for the chosen node (the shared entry `CLAIMS_CHARGE`, written at Reserve before this plugin's):
Reserve admits it again with that charge, and refuses it, with the quota's numbers, when it does
not fit (the cycle is undone; the pod waits as for PreFilter's refusal).

PostFilter preempts inside the pod's own quota (`preemption`): lower-priority preemptible pods of
that quota, on the node where evicting the fewest and lowest of them makes the pod fit both its
quota and the node. It only decides: the nominated node and the victims go back to the caller
in the cycle state (`CycleState.preemption`), and the live scheduler evicts them.

The quota state is the scheduler's `QuotaManager`, one for every profile (`Handle.scheduler`
under `QUOTA_MANAGER`), fed quotas and pods by the plugin's own feeds (`feed.QuotaFeed`,
registered through `Handle.feeds`; what-if fills it from its snapshot instead); the plugin tells
it the cluster's allocatable whenever a Node changes. With no ElasticQuota at all the plugin does
nothing (every pod uses the unlimited default quota).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final

from apis.quota import capacity_of
from kube.quotas import QuotaManager
from scheduler.cache import ClusterCache, PodInfo
from scheduler.framework import config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    Access,
    ClusterEvent,
    EnqueueExtension,
    EventAction,
    EventResource,
    ExtensionPoint,
    Handle,
    PostFilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
)
from scheduler.framework.preemption import Preemption
from scheduler.framework.shared import CLAIMS_CHARGE
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.victims import CHOSEN_VICTIMS, ChosenVictims
from scheduler.plugins.elasticquota.feed import QUOTA_CHANGED, QuotaFeed
from scheduler.plugins.elasticquota.preemption import PREEMPTING, Preempting, VictimFinder

NAME = "ElasticQuota"

#: The key under which a scheduler's QuotaManager sits in the plugins' `Handle.shared`.
QUOTA_MANAGER: Final = "scheduler.quota.QuotaManager"

log = logging.getLogger(__name__)

_EVENTS = (
    QUOTA_CHANGED,
    # Room freed: an assigned pod deleted, a binding undone, a Reservation released, ...
    ClusterEvent(EventResource.POD, EventAction.DELETE),
    ClusterEvent(EventResource.NODE, EventAction.ADD | EventAction.UPDATE),
)


class ElasticQuota(PreFilterPlugin, PostFilterPlugin, ReservePlugin, EnqueueExtension):
    name = NAME
    reads = (Access.of(CLAIMS_CHARGE, ExtensionPoint.RESERVE),)

    def __init__(self, cache: ClusterCache, manager: QuotaManager, victims: VictimFinder) -> None:
        self._cache = cache
        self.manager = manager
        self._victims = victims
        self._seen_nodes = -1

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        if not self.manager.has_quotas or state.read(PREEMPTING, Preempting) is not None:
            return None, SUCCESS
        self._refresh_total()
        nominator = self._cache.nominator
        ahead = [p.pod for pods in nominator.ahead_of(pod).values() for p in pods] if nominator else ()
        verdict = self.manager.admit(pod.pod, pod.requests, ahead=ahead)
        if verdict.admitted:
            return None, SUCCESS
        return None, Status.unschedulable(verdict.message, plugin=NAME)

    def post_filter(self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]) -> tuple[str | None, Status]:
        if not self.manager.has_quotas:
            return None, Status.unschedulable()
        self._refresh_total()
        best, why = self._victims.find(state, pod, dict(statuses))
        if best is None:
            reasons = (f"preemption: {why}.",) if why else ()
            return None, Status.unschedulable(*reasons, plugin=NAME)
        quota = self.manager.quota_of(pod.pod)
        state.preemption = Preemption(best.node, best.victims, NAME, f"quota {quota}")
        if not state.dry_run:
            victims = ",".join(v.key for v in best.victims)
            extra = {"pod": pod.key, "quota": quota, "node": best.node, "victims": victims}
            log.info("Preempting in quota", extra=extra)
        return best.node, SUCCESS

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        if not self.manager.has_quotas:
            return SUCCESS
        claims = state.get(CLAIMS_CHARGE)
        if claims:
            self._refresh_total()
            verdict = self.manager.admit(pod.pod, pod.requests, claims=claims)
            if not verdict.admitted:
                return Status.unschedulable(verdict.message, plugin=NAME)
        self.manager.reserve(pod.pod, pod.requests, claims=claims)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.manager.unreserve(pod.pod)

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return _EVENTS

    def _refresh_total(self) -> None:
        """The root quota's total is the cluster's allocatable: summed again when a Node changed."""
        generation = self._cache.static_generation
        if generation == self._seen_nodes:
            return
        self._seen_nodes = generation
        self.manager.set_capacity(capacity_of(info.allocatable for info in self._cache.nodes()))


def new(args: Mapping[str, object] | None, handle: Handle) -> ElasticQuota:
    config.expect_no_args(NAME, args)
    manager = handle.scheduler_object(QUOTA_MANAGER, QuotaManager, QuotaManager)
    QuotaFeed(manager, handle.feeds).register(QUOTA_MANAGER)
    chosen = handle.shared_object(CHOSEN_VICTIMS, ChosenVictims, ChosenVictims)
    return ElasticQuota(handle.cache, manager, VictimFinder(handle.cache, manager, handle.check, chosen=chosen))
