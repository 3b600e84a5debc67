"""The scheduling cycle, written once: assume → Reserve → Permit (and waiting there) → bind, or
undo.

After the scheduling algorithm picks a node (`Framework.schedule`), every caller runs the same
steps: assume the pod on the node in the cache, Reserve, Permit — which may hold the pod (gang
scheduling holds members until the gang is complete) — then hand the reserved placement over to
be bound, and on any failure Unreserve and forget the assumption. `SchedulingCycle` owns these
steps and the pods held at Permit, so that both the offline `Scheduler` (what-if, simulate,
bench) and the live service run them from here. The two differ in one thing only, injected as
`bind`: how a reserved placement is bound — the binding cycle, which starts with PreBind
(`pre_bind`: the writes its plugins ask for, `scheduler.framework.writes`):

- offline, in memory and at once (`Scheduler`: PreBind, Bind plugins, the bound pod confirmed
  in the cache with PreBind's annotations, PostBind);
- live, handed over to the asynchronous API binder, which runs PreBind and makes its writes on
  its own threads (out of this cycle, without the cache lock), binds, and on failure takes the
  writes back and gives the room back through this cycle's `undo`.

And in when held pods are looked at: the live loop calls `resolve_waiting` on every iteration
(polling while pods wait), offline callers when they choose. `resolve_waiting` rejects the pods
whose Permit deadline passed, binds those allowed and undoes those rejected.

Every step returns a plain `Attempt`; each carries a caller-chosen `ticket` (the live loop's queue
entry), so that a result that arrives later (a held pod resolved, a binding done) can be traced
back to the caller's own record without a second map of waiting pods.

Not thread-safe, like the cache it changes: one thread, or one lock around every call. No I/O;
time comes from the injected clock (only Permit deadlines use it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from apis.k8s.core import Pod
from scheduler.cache import ClusterCache, PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import Diagnosis
from scheduler.framework.preemption import Preemption
from scheduler.framework.runtime import Framework, ScoreTable
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.framework.writes import ObjectWrite, Writes

__all__ = ["Attempt", "Bind", "Placement", "SchedulingCycle", "pre_bind"]

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class Placement(Generic[T]):
    """A pod reserved on a node by one cycle: held at Permit, or on its way to being bound."""

    pod: PodInfo
    node: str
    framework: Framework
    state: CycleState
    #: The caller's own record of the pod, carried along (the live loop's queue entry).
    ticket: T
    #: What PreBind asked to write (`pre_bind`); empty until it ran.
    writes: Writes = field(default_factory=Writes)
    #: The object writes made so far, oldest first: what a failed binding takes back (the
    #: binder's record).
    written: list[ObjectWrite] = field(default_factory=list)

    @property
    def uid(self) -> str:
        """The cache's identity for the pod (`PodInfo.ident`)."""
        return self.pod.ident

    @property
    def annotations(self) -> Mapping[str, str]:
        """The annotations PreBind asked to set (e.g. `device-allocated`); empty until it ran."""
        return self.writes.set_annotations


def pre_bind(placement: Placement[T]) -> Status:
    """The binding's first step: run the placement's PreBind plugins and keep the writes they ask
    for on it (`Placement.writes`). Reads no cache (see `PreBindPlugin`): the live binder calls
    it on its own thread without the lock. A failure is the binding's to undo."""
    status, writes = placement.framework.run_pre_bind(placement.state, placement.pod, placement.node)
    placement.writes = writes
    return status


#: How a reserved placement is bound (PreBind first: `pre_bind`): SUCCESS when it is bound or
#: handed over to be bound; anything else is a failure the cycle undoes. The offline and the live
#: scheduler differ only here.
Bind = Callable[[Placement[T]], Status]


@dataclass(frozen=True, slots=True)
class Attempt(Generic[T]):
    """What one step of the cycle did for one pod.

    `status` is SUCCESS (bound, or handed over to be bound), WAIT (held at Permit), or why not;
    in the first two cases the pod holds its node and `placement` says where.
    """

    pod: PodInfo
    framework: Framework
    ticket: T
    status: Status
    #: The node the algorithm chose, even when a later step failed; None when no node fits.
    node: str | None = None
    placement: Placement[T] | None = None
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    #: Each plugin's score per node, when asked for with `record_scores=True`.
    scores: ScoreTable | None = None
    #: Pods the plugins want retried now (`CycleState.pods_to_activate`): a gang's siblings.
    activate: frozenset[str] = frozenset()
    #: No node fits, but PostFilter would make room by evicting these pods (the caller acts).
    preemption: Preemption | None = None

    @property
    def rejected_by(self) -> frozenset[str]:
        """Plugins whose cluster events may make the pod fit: the one that failed the step after
        a node was chosen, else every plugin that rejected a node (what the queue waits on)."""
        if self.node is None:
            return self.diagnosis.unschedulable_plugins()
        return frozenset({self.status.plugin}) if self.status.plugin else frozenset()

    @property
    def pod_must_change(self) -> bool:
        """PreFilter rejected the pod for something wrong with the pod itself (an invalid device
        request, a malformed hint: `Status.invalid_pod`): no cluster change can help, only a fix
        of the pod."""
        rejected = self.diagnosis.pre_filter_status
        return self.node is None and rejected is not None and rejected.pod_must_change


class SchedulingCycle(Generic[T]):
    """The cycle over one cache and its frameworks; holds the pods waiting at Permit."""

    def __init__(
        self,
        cache: ClusterCache,
        frameworks: Mapping[str, Framework],
        *,
        bind: Bind[T],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cache = cache
        self.frameworks = frameworks
        self._bind = bind
        self._clock = clock
        self._waiting: dict[str, Placement[T]] = {}

    @property
    def waiting(self) -> int:
        """How many pods are held at Permit."""
        return len(self._waiting)

    def schedule_one(
        self,
        pod: Pod,
        framework: Framework,
        ticket: T,
        *,
        diagnose: bool = True,
        record_scores: bool = False,
    ) -> Attempt[T] | None:
        """Pick a node for a pending pod with `framework` and run the cycle on it. Never raises
        for a pod that does not fit. None when the pod is already in the cache (bound, assumed or
        held at Permit): scheduling it again would count it twice.

        `diagnose` and `record_scores` are `Framework.schedule`'s.
        """
        info = PodInfo.of(pod)
        if self.cache.pod_node(info.ident) is not None:
            return None
        state = CycleState()
        result = framework.schedule(state, info, diagnose=diagnose, record_scores=record_scores)
        node = result.node
        if node is None:
            activate = frozenset(state.pods_to_activate)
            return Attempt(
                info,
                framework,
                ticket,
                result.status,
                diagnosis=result.diagnosis,
                scores=result.scores,
                activate=activate,
                preemption=result.preemption,
            )
        placement = Placement(info, node, framework, state, ticket)
        self.cache.assume(info, node)
        status = framework.run_reserve(state, info, node)
        if status.is_success:
            status = framework.run_permit(state, info, node, now=self._clock())
            if status.code is Code.WAIT:
                self._waiting[info.ident] = placement
                activate = frozenset(state.pods_to_activate)
                return Attempt(
                    info, framework, ticket, status, node, placement, result.diagnosis, result.scores, activate
                )
        if status.is_success:
            status = self._bind_or_undo(placement)
        else:
            self.undo(placement)
        held = placement if status.is_success else None
        activate = frozenset(state.pods_to_activate)
        return Attempt(info, framework, ticket, status, node, held, result.diagnosis, result.scores, activate)

    def resolve_waiting(self, *, now: float | None = None) -> list[Attempt[T]]:
        """Act on the pods held at Permit whose wait is over: reject those whose deadline passed,
        bind those allowed, undo those rejected. Pods still waiting are left alone.

        Acting on one pod may decide others (a gang member's undo rejects the rest of its Strict
        gang; its allowance lets the others go), so this repeats until nothing more is decided:
        a gang is resolved whole in one call. `now` overrides the clock (what-if ends every wait
        with `math.inf`).
        """
        out: list[Attempt[T]] = []
        while self._waiting:
            decided = self._resolve_once(self._clock() if now is None else now)
            if not decided:
                break
            out.extend(decided)
        return out

    def _resolve_once(self, now: float) -> list[Attempt[T]]:
        for framework in self.frameworks.values():
            framework.expire_waiting(now=now)
        out = []
        for ident, placement in list(self._waiting.items()):
            if self._waiting.get(ident) is not placement:
                continue  # undone while another pod was acted on
            framework = placement.framework
            held = framework.waiting_pod(ident)
            decision = held.decision if held is not None else Status.error("no longer waiting")
            if decision is None:
                continue
            del self._waiting[ident]
            if decision.is_success:
                framework.remove_waiting(ident)
                decision = self._bind_or_undo(placement)
            else:
                # Still held during Unreserve, so a plugin can read why (a gang names the cause).
                self.undo(placement)
            kept = placement if decision.is_success else None
            activate = frozenset(placement.state.pods_to_activate)
            out.append(
                Attempt(placement.pod, framework, placement.ticket, decision, placement.node, kept, activate=activate)
            )
        return out

    def undo(self, placement: Placement[T]) -> None:
        """Give back what the placement holds: Unreserve (every plugin, in reverse), stop holding
        it at Permit, forget the assumption. Idempotent; the binder calls it for a failed Binding."""
        placement.framework.run_unreserve(placement.state, placement.pod, placement.node)
        placement.framework.remove_waiting(placement.uid)
        if self._waiting.get(placement.uid) is placement:
            del self._waiting[placement.uid]
        self.cache.forget(placement.uid)

    def _bind_or_undo(self, placement: Placement[T]) -> Status:
        """The injected `bind`; undone when it fails."""
        status = self._bind(placement)
        if not status.is_success:
            self.undo(placement)
            return status
        return SUCCESS
