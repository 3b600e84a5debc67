"""Properties over random clusters and request sequences:

- no device ever has more used than it offers, unhealthy devices are never given out, and no VF
  is handed to two pods;
- Unreserve (and forget) restores the exact prior state of the cache;
- memoised results are exact: the devices chosen equal a fresh allocation on the same node, and
  placements equal those of a profile whose framework memo is off.

Nodes come with and without NVLink (NVSwitch, bridged pairs, random links), so nodes alike but
for NVLink must not share a memoised decision.
"""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.crds.device import DeviceType
from apis.extension import allocation, hints, names
from apis.extension.devicerequest import pod_device_requests
from apis.k8s.core import Pod
from scheduler.cache import ClusterCache, NodeInfo, PodInfo
from scheduler.core import Outcome, Scheduler, with_fgd, with_scoring
from scheduler.framework.config import PluginRef, SchedulerConfig
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterPlugin, Handle
from scheduler.framework.scoring import ScoringStrategyType
from scheduler.framework.status import SUCCESS, Status
from scheduler.plugins import DEFAULT_PLUGINS, REGISTRY
from scheduler.plugins.deviceshare import DeviceShare
from scheduler.plugins.deviceshare.allocator import Allocation, PodDeviceRequest
from tests.support.builders import make_node, make_pod, with_nvlink
from tests.support.scheduling import state_of

SCOPES = [None, hints.TopologyScope.PCIE, hints.TopologyScope.NUMA_NODE]
EXCLUSIVE = [None, hints.ExclusivePolicy.DEVICE_LEVEL, hints.ExclusivePolicy.PCIE_LEVEL]


@st.composite
def nvlink_layouts(draw: st.DrawFn, gpus: int) -> tuple[tuple[int, ...], ...]:
    """Groups of GPUs NVLink joins: none, all (NVSwitch), bridged pairs, or random links."""
    kind = draw(st.sampled_from(["none", "nvswitch", "pairs", "random"]))
    if kind == "nvswitch":
        return (tuple(range(gpus)),)
    if kind == "pairs":
        return tuple((m, m + 2) for m in range(gpus - 2) if m % 4 < 2)
    if kind == "random" and gpus > 1:
        pair = st.tuples(st.integers(0, gpus - 1), st.integers(0, gpus - 1)).filter(lambda p: p[0] != p[1])
        return tuple(draw(st.lists(pair, max_size=6)))
    return ()


@st.composite
def clusters(draw: st.DrawFn) -> list[tuple[str, dict[str, object]]]:
    out = []
    for i in range(draw(st.integers(1, 3))):
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        out.append(
            (
                f"n{i}",
                {
                    "gpus": gpus,
                    "unhealthy_gpus": frozenset(draw(st.sets(st.integers(0, gpus - 1), max_size=2))),
                    "nics_per_switch": draw(st.integers(0, 1)),
                    "vfs_per_nic": draw(st.integers(0, 2)),
                    "milli_cpu": draw(st.sampled_from([8000, 64000])),
                    "nvlink": draw(nvlink_layouts(gpus)),
                },
            )
        )
    return out


@st.composite
def pods(draw: st.DrawFn, index: int) -> Pod:
    kind = draw(st.sampled_from(["whole", "share", "bytes", "multi-share", "rdma", "joint", "cpu"]))
    amounts: dict[str, int] = {"cpu": draw(st.sampled_from([0, 1000, 4000]))}
    if kind == "whole":
        amounts["nvidia_gpu"] = draw(st.integers(1, 4))
    elif kind == "share":
        percent = draw(st.integers(1, 10)) * 10
        amounts.update(gpu_core=percent, gpu_ratio=percent)
    elif kind == "bytes":
        amounts["gpu_memory"] = draw(st.integers(1, 80)) << 30
    elif kind == "multi-share":
        amounts.update(gpu_core=40, gpu_ratio=40, gpu_shared=2)
    elif kind in ("rdma", "joint"):
        amounts["rdma"] = draw(st.sampled_from([1, 100]))
        if kind == "joint":
            amounts["nvidia_gpu"] = draw(st.integers(1, 4))
    annotations = {}
    scope, exclusive = draw(st.sampled_from(SCOPES)), draw(st.sampled_from(EXCLUSIVE))
    if scope is not None or exclusive is not None:
        hint = hints.DeviceHint(required_topology_scope=scope, exclusive_policy=exclusive)
        annotations[names.ANNOTATION_DEVICE_ALLOCATE_HINT] = hints.encode_hints({DeviceType.GPU: hint})
    if kind == "joint":
        joint_scope = draw(st.sampled_from([hints.JointScope.SAME_PCIE, None]))
        rule = hints.JointAllocate((DeviceType.GPU, DeviceType.RDMA), joint_scope)
        annotations[names.ANNOTATION_DEVICE_JOINT_ALLOCATE] = hints.encode_joint_allocate(rule)
    return make_pod(f"p{index}", annotations=annotations, **amounts)


class NoMemo(FilterPlugin):
    """A filter without a memo key: turns the framework's per-node memo off for its profile."""

    name = "NoMemo"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS


def build(cluster: list[tuple[str, dict[str, object]]], *, memo: bool, fgd: bool = False) -> Scheduler:
    def new(args: Mapping[str, object] | None, handle: Handle) -> NoMemo:
        return NoMemo()

    defaults = DEFAULT_PLUGINS if memo else (*DEFAULT_PLUGINS, PluginRef(NoMemo.name))
    # fgd: FGD with a learned workload; else LeastAllocated, whose device choice (TopologyAware)
    # `fresh_allocation` recomputes (the default, BalancedFGD, is FGD's case with balance on).
    config = (
        with_fgd(SchedulerConfig()) if fgd else with_scoring(SchedulerConfig(), ScoringStrategyType.LEAST_ALLOCATED)
    )
    scheduler = Scheduler(config, registry={**REGISTRY, NoMemo.name: new}, default_plugins=defaults, seed=7)
    for name, shape in cluster:
        args = dict(shape)
        groups = args.pop("nvlink", ())
        assert isinstance(groups, tuple)
        node, device = with_nvlink(make_node(name, **args), *groups)
        scheduler.cache.add_node(node)
        scheduler.cache.add_device(device)
    return scheduler


def check_usage(cache: ClusterCache) -> None:
    for info in cache.nodes():
        for usage in cache.device_usage(info.name):
            for name, amount in usage.used.items():
                assert amount <= usage.total.get(name, 0), (info.name, usage)
            if not usage.healthy:
                assert not usage.holders, (info.name, usage)
        for dtype in info.devices.types():
            for state in info.devices.states(dtype):
                owners = list(state.used_vfs.values())
                assert len(owners) <= sum(len(g.vfs) for g in state.info.vf_groups)


def fresh_allocation(scheduler: Scheduler, pod: Pod, node: str) -> Allocation | None:
    """What the policy decides on `node` with nothing memoised, in the state before the pod."""
    framework = scheduler.frameworks[names.SCHEDULER_NAME]
    plugin = framework.plugin("DeviceShare")
    assert isinstance(plugin, DeviceShare)
    info = scheduler.cache.node(node)
    assert info is not None
    request = PodDeviceRequest(
        pod_device_requests(pod),
        hints.hints_from_annotations(pod.annotations),
        hints.joint_allocate_from_annotations(pod.annotations),
    )
    if not request.requests:
        return None
    result = plugin.policy.allocate(info.devices, request)
    assert isinstance(result, Allocation), result
    return result


@settings(max_examples=60)
@given(cluster=clusters(), data=st.data())
def test_usage_stays_within_totals_and_memo_is_exact(
    cluster: list[tuple[str, dict[str, object]]], data: st.DataObject
) -> None:
    with_memo = build(cluster, memo=True)
    without = build(cluster, memo=False)
    for i in range(data.draw(st.integers(1, 14))):
        pod = data.draw(pods(i))
        placed: Outcome = with_memo.schedule_one(pod)
        if placed.scheduled:
            assert placed.node is not None
            expected = fresh_allocation(without, pod, placed.node)
            got = allocation.from_pod_annotations(placed.annotations)
            assert got == (dict(expected.devices) if expected is not None else {})
        reference = without.schedule_one(pod)
        assert (placed.node, dict(placed.annotations)) == (reference.node, dict(reference.annotations))
        check_usage(with_memo.cache)


@settings(max_examples=40)
@given(cluster=clusters(), data=st.data())
def test_fgd_never_overcommits_and_its_memo_is_exact(
    cluster: list[tuple[str, dict[str, object]]], data: st.DataObject
) -> None:
    """FGD placement (learned workload): within totals, and the same placements without the
    framework's memo (GPUFragmentation and DeviceShare name the workload version as their score
    epoch: a new version rescores memoised nodes, their Filter results are kept)."""
    with_memo = build(cluster, memo=True, fgd=True)
    without = build(cluster, memo=False, fgd=True)
    for i in range(data.draw(st.integers(1, 14))):
        pod = data.draw(pods(i))
        placed = with_memo.schedule_one(pod)
        reference = without.schedule_one(pod)
        assert (placed.node, dict(placed.annotations)) == (reference.node, dict(reference.annotations))
        check_usage(with_memo.cache)


@settings(max_examples=40)
@given(cluster=clusters(), data=st.data(), fgd=st.booleans())
def test_unreserve_restores_the_exact_prior_state(
    cluster: list[tuple[str, dict[str, object]]], data: st.DataObject, fgd: bool
) -> None:
    scheduler = build(cluster, memo=True, fgd=fgd)
    for i in range(data.draw(st.integers(0, 8))):
        scheduler.schedule_one(data.draw(pods(i)))
    before = state_of(scheduler.cache)
    framework = scheduler.frameworks[names.SCHEDULER_NAME]
    pod = PodInfo.of(data.draw(pods(99)))
    state = CycleState()
    result = framework.schedule(state, pod)
    if result.node is None:
        return
    scheduler.cache.assume(pod, result.node)
    assert framework.run_reserve(state, pod, result.node).is_success
    framework.run_unreserve(state, pod, result.node)
    scheduler.cache.forget(pod.ident)
    assert state_of(scheduler.cache) == before
