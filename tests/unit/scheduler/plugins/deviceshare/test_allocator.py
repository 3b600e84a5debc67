"""TopologyAwarePolicy on the reference server: 8 GPUs on 2 NUMA nodes × 2 PCIe switches, one
RDMA NIC with 4 VFs per switch (see tests/support/builders.py for the layout)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apis.crds.device import DeviceInfo, DeviceType
from apis.extension import devicetypes, hints, names, partitions
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.extension.devicerequest import pod_device_requests
from apis.k8s import labels
from apis.k8s.core import Pod
from scheduler.cache import ClusterCache, PodInfo
from scheduler.framework.scoring import ScoringStrategyType
from scheduler.framework.status import Code
from scheduler.plugins.deviceshare.allocator import Allocation, PodDeviceRequest, Rejection, TopologyAwarePolicy
from scheduler.plugins.deviceshare.args import DEFAULT_SCORING
from tests.support.builders import bound_pod, gpu_alloc, make_node, make_pod, with_nvlink
from tests.support.scheduling import make_cache

LEAST = TopologyAwarePolicy(DEFAULT_SCORING)
MOST = TopologyAwarePolicy(dataclasses.replace(DEFAULT_SCORING, type=ScoringStrategyType.MOST_ALLOCATED))


def request_of(pod: Pod) -> PodDeviceRequest:
    info = PodInfo.of(pod)
    return PodDeviceRequest(
        pod_device_requests(pod),
        hints.hints_from_annotations(info.pod.annotations),
        hints.joint_allocate_from_annotations(info.pod.annotations),
        partition_spec=partitions.spec_from_annotations(info.pod.annotations),
    )


def allocate(cache: ClusterCache, pod: Pod, policy: TopologyAwarePolicy = LEAST) -> Allocation | Rejection:
    node = cache.node("n1")
    assert node is not None
    return policy.allocate(node.devices, request_of(pod))


def minors(result: Allocation | Rejection, dtype: DeviceType = DeviceType.GPU) -> list[int]:
    assert isinstance(result, Allocation), result
    return [a.minor for a in result.devices[dtype]]


def reject(result: Allocation | Rejection) -> tuple[Code, str]:
    assert isinstance(result, Rejection), result
    return result.code, result.reason


@pytest.fixture
def cache() -> ClusterCache:
    return make_cache(make_node("n1"))


# --- whole GPUs on an empty node -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("count", "expected"),
    [(1, [0]), (2, [0, 1]), (3, [0, 1, 2]), (4, [0, 1, 2, 3]), (8, list(range(8)))],
    ids=["1-gpu", "2-same-switch", "3-same-numa", "4-one-numa", "8-whole-node"],
)
def test_whole_gpus_on_empty_node_take_the_narrowest_scope(
    cache: ClusterCache, count: int, expected: list[int]
) -> None:
    result = allocate(cache, make_pod(nvidia_gpu=count))
    assert minors(result) == expected
    assert isinstance(result, Allocation)
    first = result.devices[DeviceType.GPU][0]
    assert first.resources == {names.GPU_CORE: 100, names.GPU_MEMORY_RATIO: 100, names.GPU_MEMORY: 80 << 30}
    assert first.id == "GPU-n1-00"


def test_more_gpus_than_the_node_has_is_unresolvable(cache: ClusterCache) -> None:
    assert reject(allocate(cache, make_pod(nvidia_gpu=9))) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "Insufficient gpu devices",
    )


# --- with some GPUs used -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("count", "expected"),
    [(1, [1]), (2, [2, 3]), (3, [1, 2, 3]), (4, [4, 5, 6, 7])],
    ids=["1-beside-used", "2-same-numa-as-used", "3-fill-used-numa", "4-other-numa"],
)
def test_partly_used_scopes_are_preferred(cache: ClusterCache, count: int, expected: list[int]) -> None:
    cache.add_pod(bound_pod("share", "n1", gpu_alloc(0, 50)))
    assert minors(allocate(cache, make_pod(nvidia_gpu=count))) == expected


def test_used_gpus_are_never_given_whole(cache: ClusterCache) -> None:
    for minor in (0, 2, 4, 6):
        cache.add_pod(bound_pod(f"s{minor}", "n1", gpu_alloc(minor, 10)))
    assert minors(allocate(cache, make_pod(nvidia_gpu=4))) == [1, 3, 5, 7]
    code, reason = reject(allocate(cache, make_pod(nvidia_gpu=5)))
    assert (code, reason) == (Code.UNSCHEDULABLE, "Insufficient gpu devices")


def test_shortfall_names_the_nearest_gpu(cache: ClusterCache) -> None:
    for minor in range(8):
        cache.add_pod(bound_pod(f"s{minor}", "n1", gpu_alloc(minor, 70 if minor == 3 else 90)))
    result = allocate(cache, make_pod(gpu_core=50, gpu_ratio=50))
    assert isinstance(result, Rejection)
    assert [str(s) for s in result.shortfalls] == [
        "GPU 3 has 30 gpu-core free, needs 50",
        "GPU 3 has 30 gpu-memory-ratio free, needs 50",
        "GPU 3 has 24Gi gpu-memory free, needs 40Gi",
    ]


# --- required topology scopes --------------------------------------------------------------------
def scoped(scope: hints.TopologyScope, **amounts: int) -> Pod:
    hint = hints.encode_hints({DeviceType.GPU: hints.DeviceHint(required_topology_scope=scope)})
    return make_pod(annotations={names.ANNOTATION_DEVICE_ALLOCATE_HINT: hint}, **amounts)


def test_required_pcie_scope_never_spreads(cache: ClusterCache) -> None:
    assert minors(allocate(cache, scoped(hints.TopologyScope.PCIE, nvidia_gpu=2))) == [0, 1]
    assert reject(allocate(cache, scoped(hints.TopologyScope.PCIE, nvidia_gpu=3))) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "Insufficient Topology Scoped GPU Devices",
    )
    for minor in (0, 2, 4, 6):
        cache.add_pod(bound_pod(f"s{minor}", "n1", gpu_alloc(minor, 10)))
    assert reject(allocate(cache, scoped(hints.TopologyScope.PCIE, nvidia_gpu=2))) == (
        Code.UNSCHEDULABLE,
        "Insufficient Topology Scoped GPU Devices",
    )


def test_required_numa_scope(cache: ClusterCache) -> None:
    assert minors(allocate(cache, scoped(hints.TopologyScope.NUMA_NODE, nvidia_gpu=4))) == [0, 1, 2, 3]
    cache.add_pod(bound_pod("a", "n1", gpu_alloc(0, 10)))
    cache.add_pod(bound_pod("b", "n1", gpu_alloc(4, 10)))
    assert reject(allocate(cache, scoped(hints.TopologyScope.NUMA_NODE, nvidia_gpu=4))) == (
        Code.UNSCHEDULABLE,
        "Insufficient Topology Scoped GPU Devices",
    )
    assert minors(allocate(cache, make_pod(nvidia_gpu=4))) == [1, 2, 3, 5]  # without the hint: spread


def test_device_scope_takes_one_device_only(cache: ClusterCache) -> None:
    assert minors(allocate(cache, scoped(hints.TopologyScope.DEVICE, gpu_core=50, gpu_ratio=50))) == [0]
    assert reject(allocate(cache, scoped(hints.TopologyScope.DEVICE, nvidia_gpu=2)))[1] == (
        "Insufficient Topology Scoped GPU Devices"
    )


# --- shared GPUs under both scorings ---------------------------------------------------------------
def test_least_allocated_spreads_and_most_allocated_packs(cache: ClusterCache) -> None:
    cache.add_pod(bound_pod("a", "n1", gpu_alloc(0, 30)))
    half = make_pod(gpu_core=50, gpu_ratio=50)
    assert minors(allocate(cache, half, LEAST)) == [1]  # the emptier GPU on the partly used switch
    assert minors(allocate(cache, half, MOST)) == [0]  # the fullest GPU that fits
    big = make_pod(gpu_core=80, gpu_ratio=80)
    assert minors(allocate(cache, big, MOST)) == [1]  # GPU 0 has only 70 left


def test_shared_allocation_fills_both_memory_forms(cache: ClusterCache) -> None:
    result = allocate(cache, make_pod(gpu_memory=20 << 30))
    assert isinstance(result, Allocation)
    assert result.devices[DeviceType.GPU][0].resources == {names.GPU_MEMORY: 20 << 30, names.GPU_MEMORY_RATIO: 25}


def test_gpu_shared_spreads_a_share_over_several_gpus(cache: ClusterCache) -> None:
    result = allocate(cache, make_pod(gpu_core=50, gpu_ratio=50, gpu_shared=2))
    assert minors(result) == [0, 1]
    assert isinstance(result, Allocation)
    assert {a.resources[names.GPU_CORE] for a in result.devices[DeviceType.GPU]} == {25}


# --- unhealthy devices ----------------------------------------------------------------------------
def test_unhealthy_gpus_are_never_used() -> None:
    cache = make_cache(make_node("n1", unhealthy_gpus=frozenset({0, 1, 2, 3})))
    assert minors(allocate(cache, make_pod(nvidia_gpu=1))) == [4]
    assert minors(allocate(cache, make_pod(gpu_core=10, gpu_ratio=10))) == [4]
    assert reject(allocate(cache, make_pod(nvidia_gpu=5))) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "Insufficient gpu devices",
    )


# --- exclusivity ----------------------------------------------------------------------------------
def exclusive(policy: hints.ExclusivePolicy, name: str = "p", node: str = "", **amounts: int) -> Pod:
    hint = hints.encode_hints({DeviceType.GPU: hints.DeviceHint(exclusive_policy=policy)})
    return make_pod(name, node=node, annotations={names.ANNOTATION_DEVICE_ALLOCATE_HINT: hint}, **amounts)


def test_pcie_level_exclusive_keeps_others_off_its_switch(cache: ClusterCache) -> None:
    owner = bound_pod("owner", "n1", gpu_alloc(0, 50))
    hint = hints.encode_hints({DeviceType.GPU: hints.DeviceHint(exclusive_policy=hints.ExclusivePolicy.PCIE_LEVEL)})
    cache.add_pod(
        dataclasses.replace(
            owner,
            meta=dataclasses.replace(
                owner.meta, annotations={**owner.annotations, names.ANNOTATION_DEVICE_ALLOCATE_HINT: hint}
            ),
        )
    )
    assert minors(allocate(cache, make_pod(nvidia_gpu=1))) == [2]  # not GPU 1, beside the owner
    assert minors(allocate(cache, make_pod(gpu_core=10, gpu_ratio=10))) == [2]


def test_pcie_level_request_avoids_switches_with_other_pods(cache: ClusterCache) -> None:
    cache.add_pod(bound_pod("a", "n1", gpu_alloc(0, 10)))
    cache.add_pod(bound_pod("b", "n1", gpu_alloc(2, 10)))
    assert minors(allocate(cache, exclusive(hints.ExclusivePolicy.PCIE_LEVEL, nvidia_gpu=1))) == [4]


def test_device_level_exclusive_share_avoids_shared_gpus(cache: ClusterCache) -> None:
    cache.add_pod(bound_pod("a", "n1", gpu_alloc(0, 10)))
    pod = exclusive(hints.ExclusivePolicy.DEVICE_LEVEL, gpu_core=50, gpu_ratio=50)
    assert minors(allocate(cache, pod, MOST)) == [1]


# --- RDMA, virtual functions and joint allocation ------------------------------------------------
def test_rdma_share_is_a_virtual_function(cache: ClusterCache) -> None:
    result = allocate(cache, make_pod(rdma=1))
    assert isinstance(result, Allocation)
    (nic,) = result.devices[DeviceType.RDMA]
    assert (nic.minor, nic.resources, nic.id) == (0, {names.RDMA: 1}, "0000:1f:00.0")
    assert [(vf.minor, vf.bus_id) for vf in nic.vfs] == [(0, "0000:1f:00.1")]


def test_whole_rdma_device_takes_no_vf(cache: ClusterCache) -> None:
    result = allocate(cache, make_pod(rdma=100))
    assert isinstance(result, Allocation)
    assert result.devices[DeviceType.RDMA][0].vfs == ()


def vf_hint() -> str:
    selector = labels.LabelSelector({"type": "general"})
    return hints.encode_hints({DeviceType.RDMA: hints.DeviceHint(vf_selector=selector)})


def test_vf_selector_without_matching_vfs_is_unresolvable(cache: ClusterCache) -> None:
    hint = hints.encode_hints(
        {DeviceType.RDMA: hints.DeviceHint(vf_selector=labels.LabelSelector({"type": "storage"}))}
    )
    result = allocate(cache, make_pod(rdma=1, annotations={names.ANNOTATION_DEVICE_ALLOCATE_HINT: hint}))
    assert reject(result) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "Insufficient rdma devices")
    cache_no_vfs = make_cache(make_node("n1", vfs_per_nic=0))
    pod = make_pod(rdma=1, annotations={names.ANNOTATION_DEVICE_ALLOCATE_HINT: vf_hint()})
    assert reject(allocate(cache_no_vfs, pod)) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "Insufficient rdma VirtualFunctions",
    )


SAME_PCIE = hints.JointScope.SAME_PCIE
SCOPES = pytest.mark.parametrize("scope", [None, SAME_PCIE], ids=["no-scope", "SamePCIe"])


def joint(scope: hints.JointScope | None = SAME_PCIE, hint: hints.DeviceHint | None = None, **amounts: int) -> Pod:
    """A pod asking for `amounts` with `device-joint-allocate` {gpu, rdma} (and an RDMA hint)."""
    rule = hints.encode_joint_allocate(hints.JointAllocate((DeviceType.GPU, DeviceType.RDMA), scope))
    annotations = {names.ANNOTATION_DEVICE_JOINT_ALLOCATE: rule}
    if hint is not None:
        annotations[names.ANNOTATION_DEVICE_ALLOCATE_HINT] = hints.encode_hints({DeviceType.RDMA: hint})
    return make_pod(annotations=annotations, **amounts)


def nics(result: Allocation | Rejection) -> list[tuple[int, str]]:
    """(NIC minor, VF bus ID or '' for a whole PF) of each RDMA device allocated."""
    assert isinstance(result, Allocation), result
    return [(a.minor, a.vfs[0].bus_id if a.vfs else "") for a in result.devices[DeviceType.RDMA]]


#: The first free VF of NIC k (on the k-th switch: pci0000:10, :30, :50, :70).
VF0 = ["0000:1f:00.1", "0000:3f:00.1", "0000:5f:00.1", "0000:7f:00.1"]


# Koordinator's TestAutopilotAllocator cases ("allocate N GPU and M VF") on the same layout: an
# RDMA VF on every PCIe switch the GPUs occupy, whether or not SamePCIe is required.
@SCOPES
@pytest.mark.parametrize(
    ("count", "gpus", "expected"),
    [
        (1, [0], [0]),
        (2, [0, 1], [0]),
        (3, [0, 1, 2], [0, 1]),
        (4, [0, 1, 2, 3], [0, 1]),
        (5, [0, 1, 2, 3, 4], [0, 1, 2]),
        (6, [0, 1, 2, 3, 4, 5], [0, 1, 2]),
        (7, list(range(7)), [0, 1, 2, 3]),
        (8, list(range(8)), [0, 1, 2, 3]),
    ],
    ids=[f"{n}-gpus" for n in range(1, 9)],
)
def test_joint_allocation_gives_a_vf_on_every_gpu_switch(
    cache: ClusterCache, scope: hints.JointScope | None, count: int, gpus: list[int], expected: list[int]
) -> None:
    result = allocate(cache, joint(scope, nvidia_gpu=count, rdma=1))
    assert minors(result) == gpus
    assert nics(result) == [(k, VF0[k]) for k in expected]
    assert isinstance(result, Allocation)
    assert all(a.resources == {names.RDMA: 1} for a in result.devices[DeviceType.RDMA])


@SCOPES
def test_joint_allocation_gives_whole_nics_for_a_whole_request(
    cache: ClusterCache, scope: hints.JointScope | None
) -> None:
    result = allocate(cache, joint(scope, nvidia_gpu=6, rdma=100))
    assert nics(result) == [(0, ""), (1, ""), (2, "")]
    assert isinstance(result, Allocation)
    assert all(a.resources == {names.RDMA: 100} for a in result.devices[DeviceType.RDMA])


@SCOPES
def test_joint_allocation_skips_vfs_already_taken(cache: ClusterCache, scope: hints.JointScope | None) -> None:
    # Koordinator's "allocate 3 GPU and 2 VF with assigned devices".
    cache.add_pod(bound_pod("gpu0", "n1", gpu_alloc(0)))
    cache.add_pod(bound_pod("vf0", "n1", _vf(0, VF0[0]), dtype=DeviceType.RDMA))
    result = allocate(cache, joint(scope, nvidia_gpu=3, rdma=1))
    assert minors(result) == [1, 2, 3]
    assert nics(result) == [(0, "0000:1f:00.2"), (1, VF0[1])]


def _busy_nic_1(cache: ClusterCache, how: str) -> ClusterCache:
    """NIC 1 (switch pci0000:30) offering nothing: held whole, all its VFs taken, or unhealthy."""
    if how == "pf-held":
        cache.add_pod(bound_pod("pf1", "n1", *_whole_nic(1), dtype=DeviceType.RDMA))
    elif how == "vfs-taken":
        for i in range(4):
            cache.add_pod(bound_pod(f"vf{i}", "n1", _vf(1, f"0000:3f:00.{i + 1}"), dtype=DeviceType.RDMA))
    else:
        node, device = make_node("n1")
        sick = tuple(
            dataclasses.replace(d, health=False) if d.type is DeviceType.RDMA and d.minor == 1 else d
            for d in device.devices
        )
        cache = make_cache((node, dataclasses.replace(device, devices=sick)))
    return cache


@pytest.mark.parametrize("how", ["pf-held", "vfs-taken", "unhealthy"])
@pytest.mark.parametrize(
    ("scope", "gpus", "expected"),
    [(None, [0, 1, 2], [0, 2]), (SAME_PCIE, [4, 5, 6], [2, 3])],
    ids=["no-scope-fills-from-another-switch", "SamePCIe-moves-the-gpus"],
)
def test_a_gpu_switch_whose_nic_offers_nothing(
    cache: ClusterCache, how: str, scope: hints.JointScope | None, gpus: list[int], expected: list[int]
) -> None:
    """Without a scope (Koordinator's best effort) the GPUs stay on 0-2 and the NIC missing on
    pci0000:30 is made up from another switch, the best by score then minor. With SamePCIe,
    Koordinator would place GPUs 0-2 and reject the node; Tessera keeps the GPUs off that switch."""
    result = allocate(_busy_nic_1(cache, how), joint(scope, nvidia_gpu=3, rdma=1))
    assert minors(result) == gpus
    assert nics(result) == [(k, VF0[k]) for k in expected]


def test_without_scope_the_request_is_the_minimum(cache: ClusterCache) -> None:
    # Only NIC 1 is free: one device is all the pod asked for, so 4 GPUs on two switches fit
    # without a scope; with SamePCIe they need a NIC on each of their switches (Koordinator's
    # reason: too few free NICs for the GPUs' switches).
    for minor in (0, 2, 3):
        cache.add_pod(bound_pod(f"pf{minor}", "n1", *_whole_nic(minor), dtype=DeviceType.RDMA))
    result = allocate(cache, joint(None, nvidia_gpu=4, rdma=1))
    assert minors(result) == [0, 1, 2, 3]
    assert nics(result) == [(1, VF0[1])]
    result = allocate(cache, joint(SAME_PCIE, nvidia_gpu=4, rdma=1))
    assert isinstance(result, Rejection)
    assert (result.code, result.reason) == (Code.UNSCHEDULABLE, "Insufficient rdma devices")
    assert [str(s) for s in result.shortfalls] == ["node has 1 rdma devices free, needs 2"]


def test_same_pcie_never_takes_a_nic_off_the_gpu_switches(cache: ClusterCache) -> None:
    # Two whole NICs for GPUs on one switch: without a scope the second comes from the next
    # switch; SamePCIe allows only the GPUs' own switch, which has one NIC.
    assert nics(allocate(cache, joint(None, nvidia_gpu=2, rdma=200))) == [(0, ""), (1, "")]
    assert reject(allocate(cache, joint(SAME_PCIE, nvidia_gpu=2, rdma=200))) == (
        Code.UNSCHEDULABLE,
        "node(s) Device Joint-Allocate rules violation",
    )


def test_same_pcie_wants_a_nic_per_switch_however_few_are_asked_for(cache: ClusterCache) -> None:
    # 8 GPUs span all four switches; SamePCIe then needs four NICs, and one is held.
    cache.add_pod(bound_pod("pf3", "n1", *_whole_nic(3), dtype=DeviceType.RDMA))
    result = allocate(cache, joint(SAME_PCIE, nvidia_gpu=8, rdma=1))
    assert isinstance(result, Rejection)
    assert (result.code, result.reason) == (Code.UNSCHEDULABLE, "Insufficient rdma devices")
    assert [str(s) for s in result.shortfalls] == ["node has 3 rdma devices free, needs 4"]
    assert nics(allocate(cache, joint(None, nvidia_gpu=8, rdma=1))) == [(k, VF0[k]) for k in range(3)]


@SCOPES
def test_apply_for_all_takes_no_part_in_the_joint_rule(cache: ClusterCache, scope: hints.JointScope | None) -> None:
    # As Koordinator trims the rule: an ApplyForAll type gets every device, wherever the GPUs are.
    hint = hints.DeviceHint(allocate_strategy=hints.AllocateStrategy.APPLY_FOR_ALL)
    result = allocate(cache, joint(scope, hint, nvidia_gpu=2, rdma=100))
    assert minors(result) == [0, 1]
    assert nics(result) == [(0, ""), (1, ""), (2, ""), (3, "")]


def test_joint_allocation_takes_a_nic_on_each_gpu_switch(cache: ClusterCache) -> None:
    result = allocate(cache, joint(nvidia_gpu=4, rdma=1))
    assert minors(result) == [0, 1, 2, 3]
    assert minors(result, DeviceType.RDMA) == [0, 1]  # the NICs of pci0000:10 and pci0000:30


def test_joint_allocation_moves_gpus_to_switches_with_a_free_nic(cache: ClusterCache) -> None:
    cache.add_pod(bound_pod("nic", "n1", *_whole_nic(0), dtype=DeviceType.RDMA))
    result = allocate(cache, joint(nvidia_gpu=2, rdma=1))
    assert minors(result) == [2, 3]
    assert minors(result, DeviceType.RDMA) == [1]


def test_joint_allocation_violation_reason(cache: ClusterCache) -> None:
    for minor in range(4):
        cache.add_pod(bound_pod(f"nic{minor}", "n1", *_whole_nic(minor), dtype=DeviceType.RDMA))
    assert reject(allocate(cache, joint(nvidia_gpu=2, rdma=1))) == (Code.UNSCHEDULABLE, "Insufficient rdma devices")
    cache2 = make_cache(make_node("n1"))
    for minor in (0, 1, 2):
        cache2.add_pod(bound_pod(f"nic{minor}", "n1", *_whole_nic(minor), dtype=DeviceType.RDMA))
    cache2.add_pod(bound_pod("g", "n1", gpu_alloc(6, 10), gpu_alloc(7, 10)))
    assert reject(allocate(cache2, joint(nvidia_gpu=2, rdma=1))) == (
        Code.UNSCHEDULABLE,
        "node(s) Device Joint-Allocate rules violation",
    )


def test_without_joint_rule_nics_still_follow_the_gpus(cache: ClusterCache) -> None:
    cache.add_pod(bound_pod("share", "n1", gpu_alloc(4, 50)))
    result = allocate(cache, make_pod(nvidia_gpu=1, rdma=1))
    assert minors(result) == [5]
    assert minors(result, DeviceType.RDMA) == [2]  # pci0000:50, beside GPU 5


def test_apply_for_all_and_requests_as_count(cache: ClusterCache) -> None:
    hint = hints.encode_hints(
        {DeviceType.RDMA: hints.DeviceHint(allocate_strategy=hints.AllocateStrategy.APPLY_FOR_ALL)}
    )
    result = allocate(cache, make_pod(rdma=1, annotations={names.ANNOTATION_DEVICE_ALLOCATE_HINT: hint}))
    assert minors(result, DeviceType.RDMA) == [0, 1, 2, 3]
    hint = hints.encode_hints(
        {DeviceType.RDMA: hints.DeviceHint(allocate_strategy=hints.AllocateStrategy.REQUESTS_AS_COUNT)}
    )
    result = allocate(cache, make_pod(rdma=2, annotations={names.ANNOTATION_DEVICE_ALLOCATE_HINT: hint}))
    assert minors(result, DeviceType.RDMA) == [0, 1]
    assert isinstance(result, Allocation)
    assert all(a.resources == {names.RDMA: 1} and len(a.vfs) == 1 for a in result.devices[DeviceType.RDMA])


def test_a_gpu_secondary_gets_only_the_gpus_asked_for(cache: ClusterCache) -> None:
    # NICs first: two (RequestsAsCount) on pci0000:10 and :30; one GPU follows them, not two.
    rule = hints.encode_joint_allocate(hints.JointAllocate((DeviceType.RDMA, DeviceType.GPU)))
    as_count = hints.DeviceHint(allocate_strategy=hints.AllocateStrategy.REQUESTS_AS_COUNT)
    count = hints.encode_hints({DeviceType.RDMA: as_count})
    annotations = {names.ANNOTATION_DEVICE_JOINT_ALLOCATE: rule, names.ANNOTATION_DEVICE_ALLOCATE_HINT: count}
    result = allocate(cache, make_pod(annotations=annotations, nvidia_gpu=1, rdma=2))
    assert nics(result) == [(0, VF0[0]), (1, VF0[1])]
    assert minors(result) == [0]


def _whole_nic(minor: int) -> tuple[DeviceAllocation, ...]:
    return (DeviceAllocation(minor=minor, resources={names.RDMA: 100}),)


def _vf(minor: int, bus_id: str) -> DeviceAllocation:
    return DeviceAllocation(minor=minor, resources={names.RDMA: 1}, vfs=(VFAllocation(0, bus_id),))


def test_selector_hint_restricts_devices() -> None:
    node, device = make_node("n1")
    labelled = tuple(
        dataclasses.replace(d, labels={"tier": "fast"}) if d.type is DeviceType.GPU and d.minor >= 6 else d
        for d in device.devices
    )
    cache = make_cache((node, dataclasses.replace(device, devices=labelled)))
    selector = labels.LabelSelector({"tier": "fast"})
    hint = hints.encode_hints({DeviceType.GPU: hints.DeviceHint(selector=selector)})
    pod = make_pod(nvidia_gpu=2, annotations={names.ANNOTATION_DEVICE_ALLOCATE_HINT: hint})
    assert minors(allocate(cache, pod)) == [6, 7]
    pod = make_pod(nvidia_gpu=3, annotations={names.ANNOTATION_DEVICE_ALLOCATE_HINT: hint})
    assert reject(allocate(cache, pod)) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "Insufficient gpu devices")


def test_fpga_shares_by_amount() -> None:
    node, device = make_node("n1", gpus=0)
    fpgas = tuple(
        DeviceInfo(type=DeviceType.FPGA, minor=m, id=f"fpga-{m}", health=True, resources={names.FPGA: 100})
        for m in range(2)
    )
    cache = make_cache((node, dataclasses.replace(device, devices=fpgas)))
    cache.add_pod(bound_pod("a", "n1", DeviceAllocation(minor=0, resources={names.FPGA: 30}), dtype=DeviceType.FPGA))
    assert minors(allocate(cache, make_pod(fpga=50), MOST), DeviceType.FPGA) == [0]
    assert minors(allocate(cache, make_pod(fpga=50), LEAST), DeviceType.FPGA) == [1]
    assert reject(allocate(cache, make_pod(fpga=200))) == (Code.UNSCHEDULABLE, "Insufficient fpga devices")


def test_every_type_of_the_device_type_table_is_allocated() -> None:
    # The allocation order is the table's: a type a pod asks for is never left out while the
    # pod binds. The reference node has GPUs and RDMA NICs; each other type gets two devices.
    node, device = make_node("n1")
    percent = [row for row in devicetypes.TABLE if row.request_rule is devicetypes.RequestRule.PERCENT]
    extra = tuple(
        DeviceInfo(row.type, m, id=f"{row.type.value}-{m}", health=True, resources={row.percent_resource: 100})
        for row in percent
        if not device.of_type(row.type)
        for m in range(2)
    )
    cache = make_cache((node, dataclasses.replace(device, devices=(*device.devices, *extra))))
    result = allocate(cache, make_pod(nvidia_gpu=1, extra={row.percent_resource: 1 for row in percent}))
    assert isinstance(result, Allocation), result
    assert list(result.devices) == list(devicetypes.ALLOCATION_ORDER)


# --- NVLink: a set fully connected by NVLink first, then the scope rules ----------------------------
#: NVLink bridges joining GPUs on different PCIe switches of one NUMA node: 0-2, 1-3, 4-6, 5-7.
CROSS_SWITCH_PAIRS = ((0, 2), (1, 3), (4, 6), (5, 7))


def nvlink_cache(*groups: tuple[int, ...]) -> ClusterCache:
    return make_cache(with_nvlink(make_node("n1"), *groups))


def test_two_gpus_take_an_nvlink_pair_over_a_pcie_switch() -> None:
    assert minors(allocate(make_cache(make_node("n1")), make_pod(nvidia_gpu=2))) == [0, 1]  # PCIe order alone
    assert minors(allocate(nvlink_cache(*CROSS_SWITCH_PAIRS), make_pod(nvidia_gpu=2))) == [0, 2]


def test_an_nvlink_pair_across_numa_nodes_beats_one_switch() -> None:
    assert minors(allocate(nvlink_cache((1, 6)), make_pod(nvidia_gpu=2))) == [1, 6]


def test_among_nvlink_sets_the_scope_rules_decide() -> None:
    cache = nvlink_cache(*CROSS_SWITCH_PAIRS, (0, 1))
    assert minors(allocate(cache, make_pod(nvidia_gpu=2))) == [0, 1]  # the pair on one switch
    cache = nvlink_cache(*CROSS_SWITCH_PAIRS)
    cache.add_pod(bound_pod("share", "n1", gpu_alloc(4, 50)))
    assert minors(allocate(cache, make_pod(nvidia_gpu=2))) == [5, 7]  # bin-packing: the used NUMA node


def test_without_a_free_nvlink_set_the_scope_rules_alone_place() -> None:
    cache = nvlink_cache((0, 4), (1, 5))
    cache.add_pod(bound_pod("a", "n1", gpu_alloc(0, 50)))
    cache.add_pod(bound_pod("b", "n1", gpu_alloc(5, 50)))
    plain = make_cache(make_node("n1"))
    plain.add_pod(bound_pod("a", "n1", gpu_alloc(0, 50)))
    plain.add_pod(bound_pod("b", "n1", gpu_alloc(5, 50)))
    for count in (2, 3):
        pod = make_pod(nvidia_gpu=count)
        assert minors(allocate(cache, pod)) == minors(allocate(plain, pod))
    assert minors(allocate(cache, make_pod(nvidia_gpu=3))) == [1, 2, 3]  # no NVLink triple: one NUMA node


def test_a_required_scope_still_binds_nvlink() -> None:
    cache = nvlink_cache(*CROSS_SWITCH_PAIRS)
    assert minors(allocate(cache, scoped(hints.TopologyScope.PCIE, nvidia_gpu=2))) == [0, 1]
    assert minors(allocate(cache, scoped(hints.TopologyScope.NUMA_NODE, nvidia_gpu=2))) == [0, 2]


def test_one_gpu_ignores_nvlink() -> None:
    cache = nvlink_cache((1, 2))
    cache.add_pod(bound_pod("share", "n1", gpu_alloc(3, 50)))
    assert minors(allocate(cache, make_pod(nvidia_gpu=1))) == [2]  # beside the used GPU, as without NVLink


def test_overlapping_nvlink_sets_are_chosen_deterministically() -> None:
    # A hybrid cube-mesh like DGX-1's: each GPU joined to some, not all; largest joined sets are 4.
    mesh = ((0, 1, 2, 3), (4, 5, 6, 7), (0, 4), (1, 5), (2, 6), (3, 7))
    results = {tuple(minors(allocate(nvlink_cache(*mesh), make_pod(nvidia_gpu=4)))) for _ in range(3)}
    assert results == {(0, 1, 2, 3)}
    assert minors(allocate(nvlink_cache(*mesh[2:]), make_pod(nvidia_gpu=2))) == [0, 4]


@given(
    used=st.sets(st.integers(0, 7), max_size=6),
    count=st.integers(1, 8),
    scope=st.sampled_from([None, hints.TopologyScope.PCIE, hints.TopologyScope.NUMA_NODE]),
)
def test_nvswitch_all_to_all_places_as_without_nvlink(used: set[int], count: int, scope: object) -> None:
    """Every set is NVLink-connected on an NVSwitch node, so the scope rules decide as before."""
    caches = [make_cache(make_node("n1")), nvlink_cache(tuple(range(8)))]
    for cache in caches:
        for minor in sorted(used):
            cache.add_pod(bound_pod(f"s{minor}", "n1", gpu_alloc(minor, 30)))
    pod = scoped(scope, nvidia_gpu=count) if isinstance(scope, hints.TopologyScope) else make_pod(nvidia_gpu=count)
    plain, nvswitch = (allocate(c, pod) for c in caches)
    assert plain == nvswitch
