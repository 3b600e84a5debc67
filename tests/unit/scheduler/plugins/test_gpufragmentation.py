"""FGD placement: GPUFragmentation's node scores, FragmentationAware's GPU choice, and the
FGD profile (`scheduler.core.with_fgd`) end to end."""

from __future__ import annotations

import dataclasses

import pytest

from apis.errors import ConfigError
from apis.extension import names
from apis.extension.devicerequest import pod_device_requests
from scheduler import fragmentation
from scheduler.cache import PodInfo
from scheduler.core import Scheduler, with_fgd
from scheduler.fragmentation import TaskShape
from scheduler.framework.config import SchedulerConfig, load_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ExtensionPoint
from scheduler.plugins.deviceshare import DeviceShareArgs, FragmentationAwarePolicy
from scheduler.plugins.deviceshare.allocator import Allocation, PodDeviceRequest
from scheduler.plugins.deviceshare.args import DEFAULT_SCORING
from scheduler.plugins.gpufragmentation import GPUFragmentation, GPUFragmentationArgs
from scheduler.plugins.gpufragmentation.plugin import consolidation, pack, unpack
from scheduler.plugins.gpufragmentation.state import PodState
from tests.support.builders import allocated, bound_pod, gpu_alloc, make_node, make_pod
from tests.support.scheduling import make_cache, make_scheduler

#: The worked example of tests/unit/scheduler/fragmentation/conftest.py.
WORKLOAD = (
    (TaskShape(gpus=1, gpu_percent=30), 2),
    (TaskShape(gpus=1, gpu_percent=60), 1),
    (TaskShape(gpus=2, gpu_percent=100), 1),
    (TaskShape(milli_cpu=1000), 1),
)


def fgd_scheduler(*nodes: str, workload: tuple[tuple[TaskShape, int], ...] = WORKLOAD, gpus: int = 4) -> Scheduler:
    return make_scheduler(*(make_node(n, gpus=gpus) for n in nodes), config=with_fgd(SchedulerConfig(), workload))


def test_policy_puts_a_share_where_the_workload_loses_least() -> None:
    # GPUs free 100/50/0/0: 40% on GPU 0 costs 120, on GPU 1 100 (the worked example).
    cache = make_cache(make_node("n1", gpus=4))
    for pod in [
        bound_pod("half", "n1", gpu_alloc(1, 50), cpu=1000),
        bound_pod("full", "n1", gpu_alloc(2), gpu_alloc(3), cpu=1000),
    ]:
        cache.add_pod(pod)
    node = cache.node("n1")
    assert node is not None
    demand = fragmentation.Demand(WORKLOAD)
    request = PodDeviceRequest(pod_device_requests(make_pod(gpu_core=40, gpu_ratio=40)), demand=demand)
    result = FragmentationAwarePolicy(DEFAULT_SCORING).allocate(node.devices, request)
    assert isinstance(result, Allocation)
    assert [a.minor for a in result.devices[next(iter(result.devices))]] == [1]
    # Without a demand it is TopologyAware: a share goes to the fullest GPU that fits (GPU 1, too),
    # but a 60% share, which fits only GPU 0, still goes there.
    big = PodDeviceRequest(pod_device_requests(make_pod(gpu_core=60, gpu_ratio=60)), demand=demand)
    result = FragmentationAwarePolicy(DEFAULT_SCORING).allocate(node.devices, big)
    assert isinstance(result, Allocation)
    assert [a.minor for a in next(iter(result.devices.values()))] == [0]


def test_policy_prefers_the_fragment_over_an_empty_gpu() -> None:
    # Workload of 60% shares: a 50% share on the half-used GPU loses nothing (it was already
    # useless to them), on an empty GPU it loses 100. TopologyAware (LeastAllocated) spreads.
    scheduler = fgd_scheduler("n1", workload=((TaskShape(gpus=1, gpu_percent=60), 1),))
    scheduler.cache.add_pod(bound_pod("half", "n1", gpu_alloc(2, 50)))
    outcome = scheduler.schedule_one(make_pod("p", gpu_core=50, gpu_ratio=50))
    assert outcome.scheduled
    assert allocated(outcome.annotations) == {"gpu": [2]}


def test_plugin_scores_nodes_by_loss_and_normalizes_the_best_to_100() -> None:
    scheduler = fgd_scheduler("a", "b", workload=((TaskShape(gpus=1, gpu_percent=60), 1),))
    scheduler.cache.add_pod(bound_pod("half", "a", gpu_alloc(0, 50)))
    framework = scheduler.frameworks[names.SCHEDULER_NAME]
    plugin = framework.plugin("GPUFragmentation")
    assert isinstance(plugin, GPUFragmentation)
    pod = PodInfo.of(make_pod("p", gpu_core=50, gpu_ratio=50))
    state = CycleState()
    plugin.pre_filter(state, pod)
    nodes = [scheduler.cache.node(n) for n in ("a", "b")]
    raw = [plugin.score(state, pod, n) for n in nodes if n is not None]
    # (loss, consolidation): half of one of a's four GPUs is allocated, b is empty.
    assert [unpack(r) for r in raw] == [(0, consolidation((50, 100, 100, 100))), (100, 0)]
    assert 0 < consolidation((50, 100, 100, 100)) < consolidation((0, 50, 100, 100))
    plugin.normalize_scores(state, pod, raw)
    assert raw == [100, 0]
    outcome = scheduler.schedule_one(pod.pod)
    assert (outcome.node, allocated(outcome.annotations)) == ("a", {"gpu": [0]})


@pytest.mark.parametrize(
    ("parts", "tolerance", "expected"),
    [
        ([(5, 0), (5, 0)], 0, [100, 100]),
        ([(0, 0), (100, 0), (50, 0)], 0, [100, 0, 44]),
        ([(1, 0), (2, 0), (1000, 0)], 0, [100, 88, 0]),
        ([(10, 3), (12, 9), (14, 6), (40, 9)], 4, [90, 100, 94, 0]),
        ([(10, 3), (12, 9), (14, 6), (40, 9)], 0, [100, 83, 77, 0]),
        ([], 4, []),
    ],
    ids=["tie", "linear", "close-losses-stay-apart", "within-tolerance-fullest-wins", "exact", "none"],
)
def test_normalize(parts: list[tuple[int, int]], tolerance: int, expected: list[int]) -> None:
    plugin = fgd_scheduler("a").frameworks[names.SCHEDULER_NAME].plugin("GPUFragmentation")
    assert isinstance(plugin, GPUFragmentation)
    pod = PodInfo.of(make_pod())
    state = CycleState()
    state.write("GPUFragmentation", PodState(0, 0, None, 0, tolerance))
    scores = [pack(lost, consolidated) for lost, consolidated in parts]
    assert [unpack(s) for s in scores] == parts
    plugin.normalize_scores(state, pod, scores)
    assert scores == expected


def fgd_config(workload: tuple[tuple[TaskShape, int], ...], *, balanced: bool, tolerance: int) -> SchedulerConfig:
    config = with_fgd(SchedulerConfig(), workload, balanced=balanced)
    profile = config.profiles[0]
    args = {**profile.plugin_args["GPUFragmentation"], "tolerancePercent": tolerance}
    plugin_args = {**profile.plugin_args, "GPUFragmentation": args}
    return dataclasses.replace(config, profiles=(dataclasses.replace(profile, plugin_args=plugin_args),))


def test_near_losses_tie_and_the_fuller_node_wins() -> None:
    # A 30% share against 30% and 40% shares (total weight 2): on "used" (both GPUs half taken)
    # it costs 100 (the 40% shape loses a GPU), on "empty" 60. Exact, "empty" wins; with a
    # tolerance of 20% of a GPU (40 for weight 2) the two tie and the fuller node wins.
    workload = ((TaskShape(gpus=1, gpu_percent=30), 1), (TaskShape(gpus=1, gpu_percent=40), 1))
    for tolerance, node in ((0, "empty"), (19, "empty"), (20, "used")):
        config = fgd_config(workload, balanced=False, tolerance=tolerance)
        scheduler = make_scheduler(make_node("used", gpus=2), make_node("empty", gpus=2), config=config)
        scheduler.cache.add_pod(bound_pod("half", "used", gpu_alloc(0, 50), gpu_alloc(1, 50)))
        outcome = scheduler.schedule_one(make_pod("p", gpu_core=30, gpu_ratio=30))
        assert outcome.node == node, tolerance


def test_balance_sends_a_cpu_light_gpu_pod_to_the_cpu_poor_node() -> None:
    # The workload asks 8 CPUs per GPU. "poor" has 4 GPUs and 16 CPUs: two of its GPUs are
    # stranded for want of CPU. A whole-GPU pod with 1 CPU costs FGD one idle GPU on either
    # node (a tie, broken at random); the balance term sends it to "poor", where it takes a
    # GPU that the workload could not have fed anyway.
    workload = ((TaskShape(milli_cpu=8000, gpus=1, gpu_percent=100), 1),)
    chosen: dict[bool, set[str | None]] = {False: set(), True: set()}
    for balanced in (False, True):
        for seed in range(8):
            scheduler = make_scheduler(
                make_node("poor", gpus=4, milli_cpu=16_000),
                make_node("rich", gpus=4, milli_cpu=64_000),
                config=fgd_config(workload, balanced=balanced, tolerance=0),
                seed=seed,
            )
            chosen[balanced].add(scheduler.schedule_one(make_pod("p", cpu=1000, nvidia_gpu=1)).node)
    assert chosen == {False: {"poor", "rich"}, True: {"poor"}}


def test_the_packing_plan_keeps_a_share_off_a_gpu_it_would_strand() -> None:
    # Shares of 65, 32, 46 and 27 percent, as many of each: the plan fills GPUs with 65 + 32 and
    # 46 + 27 + 27. A 27 beside the 65 leaves 8 that nothing fits, yet the measure alone
    # prefers it (the 35 left there is usable by fewer shapes than the 54 beside the 46). The
    # plan (BalancedFGD) sends it beside the 46; the paper's FGD (no plan) beside the 65.
    shares = (65, 32, 46, 27)
    workload = (*((TaskShape(gpus=1, gpu_percent=p), 2) for p in shares), (TaskShape(gpus=1, gpu_percent=100), 5))
    chosen = {}
    for balanced in (False, True):
        scheduler = make_scheduler(
            make_node("with-65", gpus=1),
            make_node("with-46", gpus=1),
            config=fgd_config(workload, balanced=balanced, tolerance=0),
        )
        scheduler.cache.add_pod(bound_pod("a", "with-65", gpu_alloc(0, 65)))
        scheduler.cache.add_pod(bound_pod("b", "with-46", gpu_alloc(0, 46)))
        chosen[balanced] = scheduler.schedule_one(make_pod("p", gpu_core=27, gpu_ratio=27)).node
    assert chosen == {False: "with-65", True: "with-46"}


def test_a_pod_that_could_go_anywhere_leaves_a_scarce_model_to_the_pods_that_need_it() -> None:
    # Two GPUs of four are P100s and a third of the workload's one-GPU tasks ask for a P100.
    # The paper's FGD puts a whole-GPU pod on the P100 with one GPU left (it costs the 1-GPU
    # shapes 300, the G2 with two idle GPUs 400: the 2-GPU shape loses them). Counted per GPU
    # each shape can use, a P100 is worth four times as much to the P100 shape (8 GPUs, 2 of
    # them P100s): the P100 costs 600, the G2 still 400, and BalancedFGD keeps the P100 free.
    p100 = frozenset({"P100"})
    workload = (
        (TaskShape(gpus=1, gpu_percent=100), 2),
        (TaskShape(gpus=1, gpu_percent=100, models=p100), 1),
        (TaskShape(gpus=2, gpu_percent=100), 1),
    )
    chosen = {}
    for balanced in (False, True):
        scheduler = make_scheduler(
            make_node("rare", gpus=2, gpu_model="P100"),
            make_node("common", gpus=2, gpu_model="G2"),
            make_node("full-1", gpus=2, gpu_model="G2"),
            make_node("full-2", gpus=2, gpu_model="G2"),
            config=with_fgd(SchedulerConfig(), workload, balanced=balanced),
        )
        scheduler.cache.add_pod(bound_pod("on-rare", "rare", gpu_alloc(0)))
        for full in ("full-1", "full-2"):
            scheduler.cache.add_pod(bound_pod(f"on-{full}", full, gpu_alloc(0), gpu_alloc(1)))
        chosen[balanced] = scheduler.schedule_one(make_pod("p", cpu=1000, nvidia_gpu=1)).node
    assert chosen == {False: "rare", True: "common"}


def test_cpu_only_pod_goes_where_it_strands_least_gpu() -> None:
    # Shapes need 4 CPUs with their GPU share; node "small" has 6 CPUs left, "big" 64: a CPU-only
    # pod of 4 CPUs would strand small's GPUs, so it goes to big.
    workload = ((TaskShape(milli_cpu=4000, gpus=1, gpu_percent=50), 1),)
    scheduler = make_scheduler(
        make_node("small", gpus=2, milli_cpu=6000),
        make_node("big", gpus=2, milli_cpu=64_000),
        config=with_fgd(SchedulerConfig(), workload),
    )
    assert scheduler.schedule_one(make_pod("cpu", cpu=4000)).node == "big"


def test_learned_workload_is_shared_by_both_plugins() -> None:
    scheduler = make_scheduler(make_node("n1"), config=with_fgd(SchedulerConfig()))
    for i in range(5):
        assert scheduler.schedule_one(make_pod(f"p{i}", cpu=1000, gpu_core=30, gpu_ratio=30)).scheduled
    framework = scheduler.frameworks[names.SCHEDULER_NAME]
    plugin = framework.plugin("GPUFragmentation")
    assert isinstance(plugin, GPUFragmentation)
    assert dict(plugin.workload.shapes) == {TaskShape(1000, 0, 1, 30): fragmentation.WEIGHT_SCALE}


def test_pods_told_before_they_are_scheduled_are_learned_at_once() -> None:
    # A fresh scheduler with a backlog: the pending pods are in the learned workload before
    # the first is placed (pods of another scheduler are not ours to learn).
    scheduler = make_scheduler(make_node("n1"), config=with_fgd(SchedulerConfig()))
    for i in range(4):
        scheduler.observe_pod(make_pod(f"share-{i}", cpu=1000, gpu_core=30, gpu_ratio=30))
    scheduler.observe_pod(make_pod("whole", cpu=2000, nvidia_gpu=1))
    scheduler.observe_pod(make_pod("theirs", cpu=4000, nvidia_gpu=2, scheduler_name="default-scheduler"))
    plugin = scheduler.frameworks[names.SCHEDULER_NAME].plugin("GPUFragmentation")
    assert isinstance(plugin, GPUFragmentation)
    learned = dict(plugin.workload.shapes)
    assert learned.keys() == {TaskShape(1000, 0, 1, 30), TaskShape(2000, 0, 1, 100)}
    assert learned[TaskShape(1000, 0, 1, 30)] == pytest.approx(fragmentation.WEIGHT_SCALE * 4 / 5, rel=1e-3)
    assert scheduler.schedule_one(make_pod("share-0", cpu=1000, gpu_core=30, gpu_ratio=30)).scheduled
    assert dict(plugin.workload.shapes) == learned  # counted once


def test_with_fgd_enables_the_plugin_and_turns_resource_scores_off() -> None:
    config = with_fgd(SchedulerConfig(), WORKLOAD)
    profile = config.profiles[0]
    assert "GPUFragmentation" in {r.name for r in profile.multi_point.enabled}
    assert profile.points[ExtensionPoint.SCORE].disabled == {"NodeResourcesFit", "DeviceShare"}
    assert profile.plugin_args["DeviceShare"]["allocationPolicy"] == "FragmentationAware"
    assert with_fgd(config, WORKLOAD) == config  # idempotent
    framework = Scheduler(config).frameworks[names.SCHEDULER_NAME]
    assert framework.plugin_names(ExtensionPoint.SCORE) == [
        "Reservation",
        "TaintToleration",
        "NodeAffinity",
        "DynamicResources",  # scores pods with claims only
        "GPUFragmentation",
    ]


def test_the_same_profile_from_yaml() -> None:
    config = load_config(
        """
profiles:
  - schedulerName: tessera-scheduler
    plugins:
      multiPoint: {enabled: [{name: GPUFragmentation}]}
      score: {disabled: [{name: NodeResourcesFit}, {name: DeviceShare}]}
    pluginConfig:
      - name: DeviceShare
        args: {allocationPolicy: FragmentationAware}
      - name: GPUFragmentation
        args: {targetWorkload: {learn: {halfLife: 5000, maxShapes: 32}}}
"""
    )
    scheduler = make_scheduler(make_node("n1"), config=config)
    assert scheduler.schedule_one(make_pod("p", gpu_core=30, gpu_ratio=30)).scheduled


def test_target_workload_only_with_a_policy_that_uses_it() -> None:
    with pytest.raises(ConfigError, match="targetWorkload: only used by allocationPolicy FragmentationAware"):
        DeviceShareArgs.from_dict({"allocationPolicy": "TopologyAware", "targetWorkload": {"learn": {}}})


def test_bad_arguments_fail_at_start_up() -> None:
    with pytest.raises(ConfigError, match="targetWorkload.learn.halfLife: expected a positive integer"):
        GPUFragmentationArgs.from_dict({"targetWorkload": {"learn": {"halfLife": -1}}})
    with pytest.raises(ConfigError, match="colour: unknown field"):
        GPUFragmentationArgs.from_dict({"colour": 1})
    with pytest.raises(ConfigError, match=r"tolerancePercent: expected an integer in 0..100, got 101"):
        GPUFragmentationArgs.from_dict({"tolerancePercent": 101})
    with pytest.raises(ConfigError, match=r"balancePercent: expected an integer in 0..1000, got True"):
        GPUFragmentationArgs.from_dict({"balancePercent": True})
    assert GPUFragmentationArgs.from_dict({"balancePercent": 0, "tolerancePercent": 0}) == GPUFragmentationArgs(
        tolerance_percent=0, balance_percent=0
    )
