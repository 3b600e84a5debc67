"""Coscheduling: gang scheduling, all or nothing, with Koordinator's semantics and names, and
scheduler-plugins' PodGroups (`scheduling.x-k8s.io`) with that project's (`apis.extension.gang`).

- PreFilter: a pod whose gang (or a gang of its group) has fewer members created than its min,
  whose PodGroup is missing or whose min-available is unreadable is UnschedulableAndUnresolvable
  with a message that names the gang and counts its members; so is a pod that names both kinds
  of gang, and a member of a scheduler-plugins PodGroup whose `minResources` do not fit in the
  cluster's free resources (`minresources`, that project's cluster-wide pre-check). A Strict gang
  whose scheduling cycle was failed by one member turns the members not yet tried away (see
  `gangs.Gang`).
- PostFilter: a member that fits nowhere fails its Strict gang's cycle and rejects every waiting
  member of the group (their reservations, devices included, are undone by the cycle) — except,
  as in scheduler-plugins, a member of a scheduler-plugins PodGroup whose min members are
  already waiting or bound.
- Permit: the member waits (`waiting-time`) until every gang of its group has min members
  waiting — or bound, per `match-policy` — then the whole group is allowed at once.
- Unreserve: a Strict member that gives its place back (timeout, rejection, failed binding)
  rejects every waiting member of its group; NonStrict members keep waiting.
- PreBind: Koordinator's `bind-gang-group-id` and `bind-gang-member-count` annotations.
- Around the cycle: counts every pod it is told about (`PodSetExtension`), keeps a gang group's
  members together in the queue (`QueueSortExtension`), and reports each gang (`summaries`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from apis.extension import names
from apis.extension.gang import gang_conflict
from apis.k8s.core import Pod
from apis.k8s.resources import format_quantity
from scheduler.cache import PodInfo
from scheduler.framework.cycle_state import CycleState, StateData
from scheduler.framework.diagnosis import Diagnosis
from scheduler.framework.interfaces import (
    ClusterEvent,
    EnqueueExtension,
    EventAction,
    EventResource,
    Handle,
    PermitPlugin,
    PodSetExtension,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueSortExtension,
    ReservePlugin,
)
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.writes import PodAnnotations, Write
from scheduler.plugins.coscheduling import feed, minresources, reasons
from scheduler.plugins.coscheduling.args import CoschedulingArgs
from scheduler.plugins.coscheduling.gangs import Gang, GangBook

__all__ = ["NAME", "Coscheduling", "GangObserver", "GangSummary", "new"]

NAME = "Coscheduling"
_MEMBER = f"{NAME}/member"


@dataclass(frozen=True, slots=True)
class _Member(StateData):
    """Written at Permit: the gang the pod is a member of (PreBind names it)."""

    gang: Gang


class GangObserver(Protocol):
    """Told when a gang group is allowed or rejected (the live scheduler's metrics)."""

    def allowed(self, group: str, seconds: float) -> None:
        """`group` was allowed, `seconds` after its first member began to wait at Permit."""

    def rejected(self, group: str, cause: str) -> None:
        """`group`'s waiting members were rejected; `cause` is `timeout` or `failure`."""


@dataclass(frozen=True, slots=True)
class GangSummary:
    """One gang as diagnostics, explain and what-if show it."""

    name: str
    mode: str
    match_policy: str
    min_available: int
    total_number: int
    created: int
    waiting: int
    bound: int
    #: Allowed once, or at least min members bound.
    satisfied: bool
    cycle: int
    cycle_valid: bool
    #: Why the gang is not (yet) satisfied: its last failure, or what it waits for.
    reason: str
    problems: tuple[str, ...] = ()

    @property
    def state(self) -> str:
        """`gang team/train: 3 of 4 members waiting at Permit, 0 bound, min 4`."""
        return reasons.STATE.format(
            gang=self.name, waiting=self.waiting, total=self.total_number, bound=self.bound, min=self.min_available
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "mode": self.mode,
            "matchPolicy": self.match_policy,
            "min": self.min_available,
            "total": self.total_number,
            "created": self.created,
            "waiting": self.waiting,
            "bound": self.bound,
            "satisfied": self.satisfied,
            "scheduleCycle": self.cycle,
            "scheduleCycleValid": self.cycle_valid,
            "reason": self.reason,
            "problems": list(self.problems),
        }


class Coscheduling(
    PreFilterPlugin,
    PostFilterPlugin,
    ReservePlugin,
    PermitPlugin,
    PreBindPlugin,
    PostBindPlugin,
    PodSetExtension,
    QueueSortExtension,
    EnqueueExtension,
):
    name = NAME

    def __init__(self, args: CoschedulingArgs, handle: Handle, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._handle = handle
        self._clock = clock
        #: Set by the live scheduler for its metrics.
        self.observer: GangObserver | None = None
        self.book = GangBook(
            default_wait=args.default_timeout,
            default_policy=args.default_match_policy,
            upstream_wait=args.permit_waiting_seconds,
        )
        #: Members this plugin rejected with their group: their Unreserve rejects nobody again.
        self._rejected: set[str] = set()
        #: The cluster's free resources for the minResources check, by the cache's generation.
        self._free = minresources.ClusterFree()

    # --- around the cycle ---------------------------------------------------------------------------
    def pod_added(self, pod: Pod) -> None:
        self.book.add_pod(pod)

    def pod_deleted(self, pod: Pod) -> None:
        self.book.delete_pod(pod)

    def queue_group(self, pod: Pod) -> str | None:
        # Read only: the queue asks from informer threads, outside the lock the book lives under.
        gang = self.book.gang_of(pod.uid or pod.key) or self.book.gang_named(pod)
        return ",".join(gang.groups) if gang is not None else None

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        # A new member may complete a gang, a PodGroup may appear or change its min; and a member
        # turned away because a sibling did not fit may fit with it after whatever helps the
        # sibling (room freed, a node or its devices added).
        return (
            ClusterEvent(EventResource.POD, EventAction.ALL),
            feed.POD_GROUP_CHANGED,
            ClusterEvent(EventResource.NODE, EventAction.ALL),
            ClusterEvent(EventResource.DEVICE, EventAction.ALL),
        )

    # --- the cycle ----------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        if conflict := gang_conflict(pod.pod):
            # The pod's own labels: only a fix of the pod helps (explain says so).
            return None, Status.invalid_pod(conflict, plugin=NAME)
        gang = self.book.gang_of(pod.ident)
        if gang is None:
            # A pod being scheduled exists; a dry run's probe is no member (and counts for none).
            gang = self.book.gang_named(pod.pod) if state.dry_run else self.book.add_pod(pod.pod)
        if gang is None or gang.passes_once_satisfied:
            return None, SUCCESS
        problem = self._basic_check(gang)
        if problem:
            return None, Status.unresolvable(problem, plugin=NAME)
        if not gang.strict:
            return None, SUCCESS
        tried = gang.member_cycles.get(pod.ident, 0)
        cycle, valid = gang.cycle, gang.cycle_valid
        if not state.dry_run:
            gang.member_cycles[pod.ident] = cycle
            if gang.try_advance_cycle():
                # A new cycle, valid: every pending member may go again, this one included.
                state.pods_to_activate.update(self._pending_members([gang]))
        if not valid:
            message = reasons.CYCLE_INVALID.format(gang=gang.name, cycle=cycle, cause=gang.last_failure)
            return None, Status.unresolvable(message, plugin=NAME)
        if tried >= cycle:
            return None, Status.unresolvable(reasons.ALREADY_TRIED.format(gang=gang.name, cycle=cycle), plugin=NAME)
        return None, SUCCESS

    def _basic_check(self, gang: Gang) -> str:
        """Why the gang's group cannot be scheduled at all yet ("" when it can)."""
        for name, member in self.book.group_of(gang):
            if member is None or (not member.members and member.spec is None):
                return reasons.GROUP_GANG_MISSING.format(gang=gang.name, other=name)
            if member.pod_group_twice:
                return reasons.POD_GROUP_TWICE.format(
                    gang=name, koordinator=names.SIGS_SCHEDULING_GROUP, upstream=names.UPSTREAM_SCHEDULING_GROUP
                )
            if member.spec is None and member.upstream:
                return reasons.UPSTREAM_POD_GROUP_MISSING.format(gang=name, group=names.UPSTREAM_SCHEDULING_GROUP)
            if member.spec is None:
                return reasons.POD_GROUP_MISSING.format(gang=name)
            if member.spec.error:
                return reasons.INVALID_GANG.format(gang=name, problem=member.spec.error)
            if len(member.members) < member.minimum:
                return reasons.TOO_FEW_MEMBERS.format(gang=name, created=len(member.members), min=member.minimum)
        return self._min_resources_problem(gang)

    def _min_resources_problem(self, gang: Gang) -> str:
        """Why a scheduler-plugins gang's minResources do not fit the cluster ("" when they do, or
        when it declares none)."""
        spec = gang.spec
        if spec is None or not spec.upstream or not spec.min_resources:
            return ""
        cache = self._handle.cache
        own = []
        for ident in gang.members:
            node, info = cache.pod_node(ident), cache.pod_info(ident)
            if node is not None and info is not None:
                own.append((node, info))
        short = minresources.shortfalls(
            spec.min_resources, gang.minimum, cache.nodes(), own, memo=self._free, generation=cache.generation
        )
        if not short:
            return ""
        gap = "; ".join(
            reasons.MIN_RESOURCES_GAP.format(
                resource=s.resource,
                needed=format_quantity(s.resource, s.needed),
                free=format_quantity(s.resource, s.free),
            )
            for s in short
        )
        return reasons.MIN_RESOURCES.format(gang=gang.name, gap=gap)

    def post_filter(self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]) -> tuple[str | None, Status]:
        gang = self.book.gang_of(pod.ident)
        if gang is None:
            return None, Status.unschedulable()
        summary = Diagnosis(node_statuses=dict(statuses)).summary(len(self._handle.cache.nodes()))
        cause = reasons.MEMBER_UNSCHEDULABLE.format(pod=pod.key, reason=summary)
        upstream_quorum = gang.spec is not None and gang.spec.upstream and gang.valid_for_permit()
        if not gang.strict or gang.passes_once_satisfied or upstream_quorum:
            gang.last_failure = cause
            return None, Status.unschedulable(self.summary(gang).state, plugin=NAME)
        released = self._reject_group(gang, cause, fail_cycle=True)
        rejected = reasons.GROUP_REJECTED.format(gang=gang.name, cause="member unschedulable")
        message = f"{rejected}, {released} waiting released"
        return None, Status.unschedulable(message, plugin=NAME)

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        gang = self.book.gang_of(pod.ident)
        if gang is None:
            return
        gang.waiting.discard(pod.ident)
        if pod.ident in self._rejected:
            self._rejected.discard(pod.ident)
            return
        if not gang.strict or gang.passes_once_satisfied:
            return
        held = self._handle.waiting.get(pod.ident)
        why = held.decision.message if held is not None and held.decision is not None else "undone"
        self._reject_group(gang, reasons.MEMBER_UNRESERVED.format(pod=pod.key, reason=why), fail_cycle=False)

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        gang = self.book.gang_of(pod.ident)
        if gang is None or gang.spec is None:
            return SUCCESS
        state.write(_MEMBER, _Member(gang))
        if gang.first_waiting_at is None:
            gang.first_waiting_at = self._clock()
        gang.waiting.add(pod.ident)
        group = [member for _, member in self.book.group_of(gang)]
        if not all(member is not None and member.valid_for_permit() for member in group):
            # The siblings not yet placed are what the group waits for: retry them now.
            state.pods_to_activate.update(self._pending_members([m for m in group if m is not None]))
            return Status.wait(gang.spec.waiting_seconds, plugin=NAME)
        self._allow_group(gang, [member for member in group if member is not None])
        return SUCCESS

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Sequence[Write], Status]:
        # The gang as Permit found it (PreBind runs on the binder's thread, without the lock the
        # book lives under); its spec and binding count are set when the group is allowed, before
        # any member is handed to the binder, and not changed afterwards.
        member = state.read(_MEMBER, _Member)
        gang = member.gang if member is not None else None
        if gang is None or gang.spec is None:
            return (), SUCCESS
        group_id, count = gang.spec.group_id, str(gang.binding_count)
        annotations: dict[str, str | None] = {
            names.ANNOTATION_BIND_GANG_GROUP_ID: group_id,
            names.ANNOTATION_BIND_GANG_MEMBER_COUNT: count,
            names.DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID: group_id,
            names.DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT: count,
        }
        return (PodAnnotations(annotations),), SUCCESS

    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        gang = self.book.gang_of(pod.ident)
        if gang is not None:
            gang.waiting.discard(pod.ident)
            gang.bound.add(pod.ident)

    @staticmethod
    def _pending_members(gangs: list[Gang]) -> set[str]:
        return {
            ident for gang in gangs for ident in gang.members if ident not in gang.waiting and ident not in gang.bound
        }

    # --- group decisions ------------------------------------------------------------------------------
    def _allow_group(self, gang: Gang, group: list[Gang]) -> None:
        """Let every waiting member of the group go, at once."""
        names_in_group = {member.name for member in group}
        count = sum(len(member.waiting) for member in group)
        started = [m.first_waiting_at for m in group if m.first_waiting_at is not None]
        if self.observer is not None and started and not all(m.once_satisfied for m in group):
            self.observer.allowed(",".join(gang.groups), self._clock() - min(started))
        for member in group:
            member.once_satisfied = True
            member.last_failure = ""
            member.first_waiting_at = None
            if not member.binding_count:
                member.binding_count = count
        for held in list(self._handle.waiting.values()):
            owner = self.book.gang_of(held.pod.ident)
            if owner is not None and owner.name in names_in_group:
                held.allow(NAME)

    def _reject_group(self, gang: Gang, cause: str, *, fail_cycle: bool) -> int:
        """Reject every waiting member of the group (the cycle undoes them); returns how many."""
        group = {name: member for name, member in self.book.group_of(gang) if member is not None}
        if self.observer is not None and any(m.first_waiting_at is not None for m in group.values()):
            self.observer.rejected(",".join(gang.groups), "timeout" if "timeout" in cause else "failure")
        for member in group.values():
            member.last_failure = cause
            member.first_waiting_at = None
            if fail_cycle:
                member.cycle_valid = False
        message = reasons.GROUP_REJECTED.format(gang=gang.name, cause=cause)
        rejected = 0
        for held in list(self._handle.waiting.values()):
            owner = self.book.gang_of(held.pod.ident)
            if owner is not None and owner.name in group and held.decision is None:
                held.reject(NAME, message)
                self._rejected.add(held.pod.ident)
                rejected += 1
        return rejected

    # --- reporting --------------------------------------------------------------------------------------
    def summary(self, gang: Gang) -> GangSummary:
        spec = gang.spec
        satisfied = gang.once_satisfied or (gang.minimum > 0 and len(gang.bound) >= gang.minimum)
        reason = "" if satisfied else gang.last_failure or self._basic_check(gang)
        return GangSummary(
            name=gang.name,
            mode=spec.mode.value if spec is not None else "",
            match_policy=spec.match_policy.value if spec is not None else "",
            min_available=gang.minimum,
            total_number=(spec.total_number or 0) if spec is not None else 0,
            created=len(gang.members),
            waiting=len(gang.waiting),
            bound=len(gang.bound),
            satisfied=satisfied,
            cycle=gang.cycle,
            cycle_valid=gang.cycle_valid,
            reason=reason,
            problems=gang.problems,
        )

    def summaries(self) -> list[GangSummary]:
        return [self.summary(gang) for _, gang in sorted(self.book.gangs.items())]

    def gang_summary(self, name: str) -> GangSummary | None:
        gang = self.book.gangs.get(name)
        return self.summary(gang) if gang is not None else None

    def gang_of_pod(self, pod: Pod) -> GangSummary | None:
        gang = self.book.gang_of(pod.uid or pod.key)
        return self.summary(gang) if gang is not None else None


def new(args: Mapping[str, object] | None, handle: Handle) -> Coscheduling:
    plugin = Coscheduling(CoschedulingArgs.from_dict(args), handle)
    feed.watch_pod_groups(handle.feeds, plugin.book)
    feed.watch_pods(handle.feeds, plugin.book, profile=handle.profile)
    return plugin
