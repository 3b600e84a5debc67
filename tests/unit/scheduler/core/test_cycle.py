"""The scheduling cycle (`scheduler.core.cycle`), on both ways of binding it is run with: in
memory (the offline `Scheduler`) and handed over to the live binder (the loop's `Handoff`).

Real plugins (DeviceShare reserves real devices in the cache) plus `Gate`, a Permit plugin that
holds pods labelled `gate` as gang scheduling holds its members. "Restored exactly" compares the
cache's pods, per-node requests and every device's holders before and after.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from apis.extension import names
from apis.k8s.core import Pod
from scheduler.cache import ClusterCache, PodInfo
from scheduler.core import Attempt, Placement, Scheduler, SchedulingCycle, build_frameworks, pre_bind
from scheduler.framework import SUCCESS, CycleState, Handle, PluginRef, SchedulerConfig, Status
from scheduler.framework.interfaces import PermitPlugin
from scheduler.framework.status import Code
from scheduler.plugins import DEFAULT_PLUGINS, REGISTRY
from scheduler.service.loop import Handoff
from scheduler.service.queue import QueuedPod
from tests.support.builders import allocated, bound_pod, gpu_alloc, make_node, make_pod
from tests.support.clocks import FakeClock

TIMEOUT = "rejected due to timeout after waiting at permit by Gate"


class Gate(PermitPlugin):
    """Holds pods labelled `gate` at Permit for 30 s."""

    name = "Gate"

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return Status.wait(30) if "gate" in pod.pod.labels else SUCCESS


def _new_gate(args: Mapping[str, object] | None, handle: Handle) -> Gate:
    return Gate()


REGISTRY_WITH_GATE = {**REGISTRY, Gate.name: _new_gate}
PLUGINS_WITH_GATE = (*DEFAULT_PLUGINS, PluginRef(Gate.name))


def gated(name: str, gpus: int = 4) -> Pod:
    return make_pod(name, labels={"gate": "1"}, nvidia_gpu=gpus, cpu=1000)


def fill(cache: ClusterCache) -> None:
    """Two GPU nodes, one already running a pod that holds GPUs 0 and 1."""
    for name in ("n1", "n2"):
        node, device = make_node(name)
        cache.add_node(node)
        cache.add_device(device)
    cache.add_pod(bound_pod("running", "n1", gpu_alloc(0), gpu_alloc(1), cpu=2000))


def snapshot(cache: ClusterCache) -> tuple[object, ...]:
    """Everything a cycle may change in the cache (generations aside)."""
    pods = sorted((p.ident, cache.pod_node(p.ident), cache.is_assumed(p.ident)) for p in cache.pods())
    nodes = {
        n.name: (sorted(n.pods), dict(n.requested), list(n.non_zero_requested), cache.device_usage(n.name))
        for n in cache.nodes()
    }
    return pods, nodes


def live_cycle(
    clock: FakeClock, bind: Callable[[Placement[QueuedPod]], Status] | None = None
) -> tuple[SchedulingCycle[QueuedPod], Handoff]:
    """The cycle as the live service builds it: its bind is the loop's Handoff, its tickets queue entries."""
    cache = ClusterCache()
    fill(cache)
    frameworks = build_frameworks(
        SchedulerConfig(), cache, registry=REGISTRY_WITH_GATE, default_plugins=PLUGINS_WITH_GATE
    )
    handoff = Handoff()
    return SchedulingCycle(cache, frameworks, bind=bind or handoff, clock=clock), handoff


def offline_scheduler(clock: FakeClock) -> Scheduler:
    scheduler = Scheduler(registry=REGISTRY_WITH_GATE, default_plugins=PLUGINS_WITH_GATE, clock=clock)
    fill(scheduler.cache)
    return scheduler


def entry(pod: Pod) -> QueuedPod:
    return QueuedPod(pod, first_seen=0.0, timestamp=0.0)


def schedule(cycle: SchedulingCycle[QueuedPod], pod: Pod, ticket: QueuedPod | None = None) -> Attempt[QueuedPod]:
    attempt = cycle.schedule_one(pod, cycle.frameworks[names.SCHEDULER_NAME], ticket or entry(pod))
    assert attempt is not None
    return attempt


def decide(cycle: SchedulingCycle[Any], clock: FakeClock, ident: str, how: str) -> None:
    """Allow, reject, or let the pod's Permit wait time out."""
    waiting = cycle.frameworks[names.SCHEDULER_NAME].waiting_pod(ident)
    assert waiting is not None
    if how == "allow":
        waiting.allow(Gate.name)
    elif how == "reject":
        waiting.reject(Gate.name, "the gang lost a member")
    else:
        clock.now += 31


# --- offline: bound in memory ---------------------------------------------------------------------
def test_offline_a_pod_allowed_at_permit_is_bound_in_memory() -> None:
    clock = FakeClock(1000.0)
    scheduler = offline_scheduler(clock)
    held = scheduler.schedule_one(gated("g"))
    assert held.status.code is Code.WAIT and held.node is not None and not held.annotations
    assert scheduler.cache.is_assumed("uid-default-g") and scheduler.cycle.waiting == 1
    assert scheduler.resolve_waiting() == []  # still waiting
    decide(scheduler.cycle, clock, "uid-default-g", "allow")
    (bound,) = scheduler.resolve_waiting()
    assert bound.scheduled and bound.node == held.node and bound.pod == "default/g"
    assert len(allocated(bound.annotations)["gpu"]) == 4
    # Confirmed in the cache as bound, with the annotation PreBind asked for.
    assert not scheduler.cache.is_assumed("uid-default-g") and scheduler.cycle.waiting == 0
    assert scheduler.frameworks[names.SCHEDULER_NAME].waiting_pod("uid-default-g") is None
    info = scheduler.cache.pod_info("uid-default-g")
    assert info is not None and info.pod.node_name == bound.node
    key = names.ANNOTATION_DEVICE_ALLOCATED
    assert info.pod.annotations[key] == bound.annotations[key]
    assert scheduler.resolve_waiting() == []


@pytest.mark.parametrize("how", ["reject", "timeout"])
def test_offline_a_pod_rejected_at_permit_is_undone_exactly(how: str) -> None:
    clock = FakeClock(1000.0)
    scheduler = offline_scheduler(clock)
    before = snapshot(scheduler.cache)
    assert scheduler.schedule_one(gated("g")).status.code is Code.WAIT
    assert snapshot(scheduler.cache) != before
    decide(scheduler.cycle, clock, "uid-default-g", how)
    (undone,) = scheduler.resolve_waiting()
    assert undone.node is None and undone.status.code is Code.UNSCHEDULABLE and undone.status.plugin == Gate.name
    assert undone.status.message == (TIMEOUT if how == "timeout" else "the gang lost a member")
    assert snapshot(scheduler.cache) == before
    assert scheduler.cycle.waiting == 0
    assert scheduler.frameworks[names.SCHEDULER_NAME].waiting_pod("uid-default-g") is None
    assert scheduler.schedule_one(make_pod("after", nvidia_gpu=8)).scheduled  # its room is free again


# --- live: handed over to the binder --------------------------------------------------------------
def test_live_a_pod_allowed_at_permit_is_handed_over_with_its_annotations() -> None:
    clock = FakeClock(1000.0)
    cycle, handoff = live_cycle(clock)
    ticket = entry(gated("g"))
    held = schedule(cycle, ticket.pod, ticket)
    assert held.status.code is Code.WAIT and held.placement is not None and held.ticket is ticket
    assert handoff.take() == [] and cycle.resolve_waiting() == []
    decide(cycle, clock, "uid-default-g", "allow")
    (resolved,) = cycle.resolve_waiting()
    assert resolved.status is SUCCESS and resolved.ticket is ticket and resolved.placement is held.placement
    (placement,) = handoff.take()
    assert placement is held.placement and placement.ticket is ticket and placement.node == held.node
    assert pre_bind(placement) is SUCCESS  # the binder's first step, on its own thread
    assert len(allocated(placement.annotations)["gpu"]) == 4
    # Still assumed: the binder finishes it (or undoes it) once the API answers.
    assert cycle.cache.is_assumed("uid-default-g") and cycle.waiting == 0
    assert cycle.frameworks[names.SCHEDULER_NAME].waiting_pod("uid-default-g") is None


@pytest.mark.parametrize("how", ["reject", "timeout"])
def test_live_a_pod_rejected_at_permit_is_undone_exactly_and_never_handed_over(how: str) -> None:
    clock = FakeClock(1000.0)
    cycle, handoff = live_cycle(clock)
    before = snapshot(cycle.cache)
    ticket = entry(gated("g"))
    schedule(cycle, ticket.pod, ticket)
    decide(cycle, clock, "uid-default-g", how)
    (undone,) = cycle.resolve_waiting()
    assert undone.ticket is ticket and undone.placement is None and undone.rejected_by == {Gate.name}
    assert undone.status.message == (TIMEOUT if how == "timeout" else "the gang lost a member")
    assert handoff.take() == []
    assert snapshot(cycle.cache) == before and cycle.waiting == 0


@pytest.mark.parametrize("gate", [False, True], ids=["at-once", "after-permit"])
def test_live_a_failed_binding_is_undone_exactly_through_the_cycle(gate: bool) -> None:
    clock = FakeClock(1000.0)
    cycle, handoff = live_cycle(clock)
    before = snapshot(cycle.cache)
    pod = gated("p") if gate else make_pod("p", nvidia_gpu=4, cpu=1000)
    attempt = schedule(cycle, pod)
    if gate:
        decide(cycle, clock, "uid-default-p", "allow")
        (attempt,) = cycle.resolve_waiting()
    assert attempt.status.is_success
    (placement,) = handoff.take()
    assert snapshot(cycle.cache) != before
    cycle.undo(placement)  # what the binder does when the API refuses the Binding
    assert snapshot(cycle.cache) == before
    cycle.undo(placement)  # idempotent
    assert snapshot(cycle.cache) == before


@pytest.mark.parametrize("gate", [False, True], ids=["at-once", "after-permit"])
def test_a_bind_that_fails_at_once_is_undone_and_reported(gate: bool) -> None:
    clock = FakeClock(1000.0)
    refused: list[Placement[QueuedPod]] = []

    def refuse(placement: Placement[QueuedPod]) -> Status:
        refused.append(placement)
        assert pre_bind(placement) is SUCCESS  # a binding starts with PreBind
        return Status.error("the API server said no", plugin="Binder")

    cycle, _ = live_cycle(clock, bind=refuse)
    before = snapshot(cycle.cache)
    attempt = schedule(cycle, gated("p") if gate else make_pod("p", nvidia_gpu=4))
    if gate:
        decide(cycle, clock, "uid-default-p", "allow")
        (attempt,) = cycle.resolve_waiting()
    assert attempt.status == Status.error("the API server said no", plugin="Binder")
    assert attempt.placement is None and attempt.node == refused[0].node and attempt.rejected_by == {"Binder"}
    assert len(allocated(refused[0].annotations)["gpu"]) == 4  # PreBind ran before bind
    assert snapshot(cycle.cache) == before


def test_a_pod_already_in_the_cache_is_not_scheduled_again() -> None:
    cycle, handoff = live_cycle(FakeClock(1000.0))
    framework = cycle.frameworks[names.SCHEDULER_NAME]
    schedule(cycle, gated("g"))
    assert cycle.schedule_one(gated("g"), framework, entry(gated("g"))) is None  # held at Permit
    schedule(cycle, make_pod("p", cpu=100))
    assert cycle.schedule_one(make_pod("p", cpu=100), framework, entry(make_pod("p"))) is None  # being bound
    assert len(handoff.take()) == 1


def test_a_pod_that_fits_nowhere_names_the_plugins_that_rejected_it() -> None:
    cycle, handoff = live_cycle(FakeClock(1000.0))
    before = snapshot(cycle.cache)
    attempt = schedule(cycle, make_pod("huge", nvidia_gpu=9))
    assert attempt.node is None and attempt.placement is None and attempt.status.is_rejection
    assert attempt.rejected_by == attempt.diagnosis.unschedulable_plugins() and attempt.rejected_by
    assert handoff.take() == [] and snapshot(cycle.cache) == before


def test_undoing_a_held_pod_stops_holding_it() -> None:
    clock = FakeClock(1000.0)
    cycle, _ = live_cycle(clock)
    before = snapshot(cycle.cache)
    held = schedule(cycle, gated("g"))
    assert held.placement is not None
    cycle.undo(held.placement)
    assert cycle.waiting == 0 and cycle.frameworks[names.SCHEDULER_NAME].waiting_pod("uid-default-g") is None
    assert snapshot(cycle.cache) == before
    clock.now += 31
    assert cycle.resolve_waiting() == []


def test_a_pod_its_framework_stopped_holding_is_undone() -> None:
    cycle, _ = live_cycle(FakeClock(1000.0))
    before = snapshot(cycle.cache)
    ticket = entry(gated("g"))
    schedule(cycle, ticket.pod, ticket)
    cycle.frameworks[names.SCHEDULER_NAME].remove_waiting("uid-default-g")
    (undone,) = cycle.resolve_waiting()
    assert undone.status == Status.error("no longer waiting") and undone.ticket is ticket
    assert snapshot(cycle.cache) == before and cycle.waiting == 0


def test_the_core_exports_what_it_names() -> None:
    core = importlib.import_module("scheduler.core")
    assert all(hasattr(core, name) for name in core.__all__)
    assert {"Attempt", "Bind", "Placement", "Scheduler", "SchedulingCycle", "with_fgd"} <= set(core.__all__)


@pytest.mark.parametrize(
    ("pod", "must_change"),
    [
        (make_pod("invalid", gpu_core=150, gpu_ratio=150), True),
        (make_pod("bad-hint", nvidia_gpu=1, annotations={names.ANNOTATION_DEVICE_ALLOCATE_HINT: "{"}), True),
        (make_pod("too-big", nvidia_gpu=9), False),
        (make_pod("fits", nvidia_gpu=1), False),
    ],
    ids=["invalid-request", "malformed-hint", "fits-nowhere", "fits"],
)
def test_only_the_pods_own_unresolvable_problem_asks_for_a_change_to_the_pod(pod: Pod, must_change: bool) -> None:
    cycle, _ = live_cycle(FakeClock(1000.0))
    assert schedule(cycle, pod).pod_must_change is must_change
