"""The framework runtime: extension point order, Permit waiting, failures, search bounds."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import pytest

from apis.extension import names
from scheduler.cache import NodeInfo, PodInfo
from scheduler.core import Scheduler
from scheduler.framework.config import PluginRef, SchedulerConfig, load_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    BindPlugin,
    FilterPlugin,
    Handle,
    PermitPlugin,
    PostBindPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from scheduler.framework.runtime import num_feasible_nodes_to_find
from scheduler.framework.status import SKIP, SUCCESS, Code, Status
from scheduler.framework.writes import PodAnnotations, Write
from scheduler.plugins import DEFAULT_PLUGINS, REGISTRY
from tests.support.builders import make_node, make_pod
from tests.support.clocks import FakeClock
from tests.support.scheduling import make_cache


class Recorder(
    PreFilterPlugin,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ReservePlugin,
    PermitPlugin,
    PreBindPlugin,
    BindPlugin,
    PostBindPlugin,
):
    """Records every call; its behaviour is set per test through class attributes."""

    name = "Recorder"
    events: list[str] = []
    only: frozenset[str] | None = None
    reserve_status: Status = SUCCESS
    permit_status: Status = SUCCESS
    crash_in_filter = False

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        self.events.append("pre_filter")
        return (PreFilterResult(self.only) if self.only is not None else None), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if self.crash_in_filter:
            raise RuntimeError("boom")
        self.events.append(f"filter {node.name}")
        return SUCCESS

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        self.events.append("pre_score")
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        self.events.append(f"score {node.name}")
        return 100 if node.name == "n2" else 0

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.events.append(f"reserve {node}")
        return self.reserve_status

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.events.append(f"unreserve {node}")

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.events.append("permit")
        return self.permit_status

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Sequence[Write], Status]:
        self.events.append("pre_bind")
        return (PodAnnotations({"example.com/seen": node}),), SUCCESS

    def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.events.append("bind")
        return SKIP

    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.events.append("post_bind")


@pytest.fixture
def recorder() -> type[Recorder]:
    Recorder.events = []
    Recorder.only = None
    Recorder.reserve_status = SUCCESS
    Recorder.permit_status = SUCCESS
    Recorder.crash_in_filter = False
    return Recorder


def recorder_scheduler(clock: FakeClock | None = None, config: SchedulerConfig | None = None) -> Scheduler:
    def new(args: Mapping[str, object] | None, handle: Handle) -> Recorder:
        return Recorder()

    scheduler = Scheduler(
        config,
        registry={**REGISTRY, Recorder.name: new},
        default_plugins=(*DEFAULT_PLUGINS, PluginRef(Recorder.name)),
        clock=clock or FakeClock(1000.0),
    )
    for name in ("n1", "n2"):
        node, device = make_node(name)
        scheduler.cache.add_node(node)
        scheduler.cache.add_device(device)
    return scheduler


def test_extension_points_run_in_order(recorder: type[Recorder]) -> None:
    scheduler = recorder_scheduler()
    outcome = scheduler.schedule_one(make_pod("p", cpu=100))
    assert outcome.node == "n2"
    assert outcome.annotations == {"example.com/seen": "n2"}
    assert recorder.events == [
        "pre_filter",
        "filter n1",
        "filter n2",
        "pre_score",
        "score n1",
        "score n2",
        "reserve n2",
        "permit",
        "pre_bind",
        "bind",
        "post_bind",
    ]
    assert scheduler.cache.pod_node("uid-default-p") == "n2" and not scheduler.cache.is_assumed("uid-default-p")


def test_failed_reserve_unreserves_and_forgets(recorder: type[Recorder]) -> None:
    recorder.reserve_status = Status.unschedulable("no room in the quota")
    scheduler = recorder_scheduler()
    outcome = scheduler.schedule_one(make_pod("p", nvidia_gpu=1))
    assert outcome.status == Status.unschedulable("no room in the quota", plugin="Recorder")
    assert recorder.events[-2:] == ["reserve n2", "unreserve n2"]
    assert scheduler.cache.pod_node("uid-default-p") is None
    assert all(not u.holders for n in ("n1", "n2") for u in scheduler.cache.device_usage(n))


def test_permit_wait_then_allow_binds(recorder: type[Recorder]) -> None:
    recorder.permit_status = Status.wait(30)
    clock = FakeClock(1000.0)
    scheduler = recorder_scheduler(clock)
    outcome = scheduler.schedule_one(make_pod("gang-0", nvidia_gpu=1))
    assert outcome.status.code is Code.WAIT and outcome.node == "n2"
    assert scheduler.cache.is_assumed("uid-default-gang-0")
    framework = scheduler.frameworks[names.SCHEDULER_NAME]
    waiting = framework.waiting_pod("uid-default-gang-0")
    assert waiting is not None and waiting.deadline == 1030.0
    assert scheduler.resolve_waiting() == []
    waiting.allow("Recorder")
    (bound,) = scheduler.resolve_waiting()
    assert bound.scheduled and bound.node == "n2"
    assert not scheduler.cache.is_assumed("uid-default-gang-0")


def test_permit_timeout_rejects_and_releases(recorder: type[Recorder]) -> None:
    recorder.permit_status = Status.wait(30)
    clock = FakeClock(1000.0)
    scheduler = recorder_scheduler(clock)
    scheduler.schedule_one(make_pod("gang-0", nvidia_gpu=1))
    clock.now += 31
    (rejected,) = scheduler.resolve_waiting()
    assert rejected.status.code is Code.UNSCHEDULABLE
    assert rejected.status.message == "rejected due to timeout after waiting at permit by Recorder"
    assert scheduler.cache.pod_node("uid-default-gang-0") is None
    assert all(not u.holders for u in scheduler.cache.device_usage("n2"))


def test_permit_reject(recorder: type[Recorder]) -> None:
    recorder.permit_status = Status.unschedulable("gang member failed")
    scheduler = recorder_scheduler()
    outcome = scheduler.schedule_one(make_pod("p"))
    assert outcome.status.reasons == ("gang member failed",) and outcome.status.plugin == "Recorder"
    assert "unreserve n2" in recorder.events


def test_a_crashing_plugin_is_an_error_not_a_crash(recorder: type[Recorder], caplog: pytest.LogCaptureFixture) -> None:
    recorder.crash_in_filter = True
    scheduler = recorder_scheduler()
    with caplog.at_level(logging.ERROR):
        outcome = scheduler.schedule_one(make_pod("p"))
    assert outcome.status.code is Code.ERROR
    assert outcome.status.plugin == "Recorder"
    assert outcome.status.message == "RuntimeError: boom"
    assert any(r.getMessage() == "Plugin failed" and r.exc_info for r in caplog.records)
    recorder.crash_in_filter = False
    assert scheduler.schedule_one(make_pod("q")).scheduled  # the next cycle runs normally


def test_prefilter_narrowing_and_diagnosis(recorder: type[Recorder]) -> None:
    recorder.only = frozenset({"n1"})
    scheduler = recorder_scheduler()
    framework = scheduler.frameworks[names.SCHEDULER_NAME]
    pod = PodInfo.of(make_pod("p", cpu=10**9))
    quick = framework.schedule(CycleState(), pod, diagnose=False)
    assert quick.node is None and set(quick.diagnosis.node_statuses) == {"n1"}
    full = framework.schedule(CycleState(), pod)
    assert set(full.diagnosis.node_statuses) == {"n1", "n2"}
    assert full.status.message == "0/2 nodes are available: 2 Insufficient cpu."
    assert scheduler.schedule_one(make_pod("small", cpu=10)).node == "n1"


@pytest.mark.parametrize(
    ("nodes", "percentage", "expected"),
    [(50, 0, 50), (1000, 0, 420), (5000, 0, 500), (20000, 0, 1000), (1000, 10, 100), (1000, 5, 100), (1000, 100, 1000)],
)
def test_number_of_feasible_nodes_to_find(nodes: int, percentage: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(nodes, percentage) == expected


def test_search_stops_early_and_rotates() -> None:
    config = load_config("percentageOfNodesToScore: 50")
    scheduler = Scheduler(config)
    for i in range(300):
        node, device = make_node(f"n{i:03d}", gpus=1, nics_per_switch=0)
        scheduler.cache.add_node(node)
        scheduler.cache.add_device(device)
    framework = scheduler.frameworks[names.SCHEDULER_NAME]
    first = framework.schedule(CycleState(), PodInfo.of(make_pod("a", cpu=10)))
    second = framework.schedule(CycleState(), PodInfo.of(make_pod("b", cpu=10)))
    assert (first.evaluated_nodes, first.feasible_nodes) == (150, 150)
    assert (second.evaluated_nodes, second.feasible_nodes) == (150, 150)
    assert first.node != second.node


class EpochRecorder(Recorder):
    """A Recorder whose results are memoisable, with a score epoch set per test."""

    epoch = 0

    def memo_key(self, state: CycleState, pod: PodInfo) -> str:
        return "same"

    def score_epoch(self, state: CycleState, pod: PodInfo) -> int:
        return self.epoch


def test_a_new_score_epoch_rescores_without_refiltering(recorder: type[Recorder]) -> None:
    """What a learned workload's new version needs: raw scores recomputed, Filter results kept
    (refiltering every node for every pod shape at each version was most of FGD's extra cost)."""

    def new(args: Mapping[str, object] | None, handle: Handle) -> EpochRecorder:
        return EpochRecorder()

    scheduler = Scheduler(
        registry={**REGISTRY, EpochRecorder.name: new},
        default_plugins=(*DEFAULT_PLUGINS, PluginRef(EpochRecorder.name)),
    )
    for name in ("n1", "n2"):
        node, device = make_node(name)
        scheduler.cache.add_node(node)
        scheduler.cache.add_device(device)
    framework = scheduler.frameworks[names.SCHEDULER_NAME]

    def cycle(name: str) -> list[str]:
        Recorder.events = []
        assert framework.schedule(CycleState(), PodInfo.of(make_pod(name, cpu=10))).node == "n2"
        return sorted(e for e in Recorder.events if e.startswith(("filter", "score")))

    assert cycle("a") == ["filter n1", "filter n2", "score n1", "score n2"]
    assert cycle("b") == []  # same key, same epoch, nodes unchanged: all memoised
    EpochRecorder.epoch = 1
    assert cycle("c") == ["score n1", "score n2"]
    assert cycle("d") == []


def test_the_handle_checks_nodes_with_its_own_profile_once_built(recorder: type[Recorder]) -> None:
    """`Handle.check` is the framework's, given at construction: a plugin that asks before the
    profile is built gets an error, not an answer from an empty chain; afterwards it runs the
    profile's PreFilter and Filter chains."""
    handles: list[Handle] = []

    def new(args: Mapping[str, object] | None, handle: Handle) -> Recorder:
        with pytest.raises(RuntimeError, match="not built yet"):
            handle.check.pre_filter(CycleState(), PodInfo.of(make_pod("early")))
        handles.append(handle)
        return Recorder()

    scheduler = Scheduler(
        registry={**REGISTRY, Recorder.name: new},
        default_plugins=(*DEFAULT_PLUGINS, PluginRef(Recorder.name)),
    )
    node, device = make_node("n1")
    scheduler.cache.add_node(node)
    scheduler.cache.add_device(device)
    (handle,) = handles
    state, pod = CycleState(), PodInfo.of(make_pod("p", cpu=10))
    assert handle.check.pre_filter(state, pod) is SUCCESS
    info = scheduler.cache.node("n1")
    assert info is not None
    assert handle.check.filter(state, pod, info) is SUCCESS
    assert Recorder.events == ["pre_filter", "filter n1"]
    Recorder.crash_in_filter = True
    with pytest.raises(RuntimeError, match="boom"):
        handle.check.filter(state, pod, info)


def test_a_plugin_built_outside_a_framework_cannot_check_nodes() -> None:
    handle = Handle(make_cache(), names.SCHEDULER_NAME)
    with pytest.raises(RuntimeError, match="outside a Framework"):
        handle.check.pre_filter(CycleState(), PodInfo.of(make_pod("p")))
