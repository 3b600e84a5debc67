"""GPU partitions in DeviceShare. The expected choices are those of Koordinator's own
allocation cases (its deviceshare `TestAllocateByPartition`, `allocateByPartition` and
`selectPartitionByBinPack`): an 8-GPU Hopper node labelled with its model, with the built-in
table, `Honor` unless a case says otherwise; then the pod's `gpu-partition-spec` and a Device's
own table."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

import pytest

from apis.crds.device import Device
from apis.extension import names, partitions
from apis.extension.partitions import GPUPartition, PartitionTable
from apis.k8s import labels as labelsel
from apis.k8s import quantity
from apis.k8s.core import Node
from scheduler.cache import ClusterCache
from scheduler.framework.status import Code
from scheduler.plugins.deviceshare import reasons
from scheduler.plugins.deviceshare.allocator import Allocation, Rejection
from tests.support.builders import allocated, bound_pod, gpu_alloc, make_node, make_pod
from tests.support.scheduling import make_cache, make_scheduler

from .test_allocator import allocate, minors

HONOR = {names.LABEL_GPU_PARTITION_POLICY: "Honor"}
PREFER = {names.LABEL_GPU_PARTITION_POLICY: "Prefer"}


def hopper(model: str = "H800", policy: Mapping[str, str] = HONOR, **shape: object) -> tuple[Node, Device]:
    return make_node("n1", gpu_model=model, labels=dict(policy), **shape)


def cache_with(node: tuple[Node, Device], *used: int) -> ClusterCache:
    """The node, with one running pod holding each GPU of `used`."""
    cache = make_cache(node)
    for minor in used:
        cache.add_pod(bound_pod(f"held-{minor}", "n1", gpu_alloc(minor), nvidia_gpu=1))
    return cache


def rejected(result: Allocation | Rejection) -> Rejection:
    assert isinstance(result, Rejection), result
    return result


def spec(text: str) -> dict[str, str]:
    return {names.ANNOTATION_GPU_PARTITION_SPEC: text}


# --- Koordinator's cases: built-in table, Honor ------------------------------------------------------
@pytest.mark.parametrize(
    ("gpus", "want"),
    [(1, [0]), (2, [0, 1]), (4, [0, 1, 2, 3]), (8, list(range(8)))],
    ids=["one", "two", "four", "eight"],
)
def test_an_empty_hopper_node_gives_the_first_partition_of_the_count(gpus: int, want: list[int]) -> None:
    assert minors(allocate(cache_with(hopper()), make_pod(nvidia_gpu=gpus))) == want


@pytest.mark.parametrize("gpus", [3, 6])
def test_a_count_the_table_has_no_partition_of_is_refused_for_good(gpus: int) -> None:
    result = rejected(allocate(cache_with(hopper()), make_pod(nvidia_gpu=gpus)))
    assert (result.code, result.reason) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons.UNSUPPORTED_GPU_COUNT)
    assert "hold 1, 2, 4, 8 GPUs, not" in result.details[0]


@pytest.mark.parametrize(
    ("model", "used", "gpus", "want"),
    [
        ("H800", (2, 3), 2, [0, 1]),  # 0-1 keeps the half 4-7 whole; 4-5 would break it
        ("H800", (4,), 2, [6, 7]),  # with 4 taken, 6-7 keeps the half 0-3 and the pair 2-3... whole
        ("H800", (4,), 1, [5]),  # the GPU beside the taken one: every other pair and 0-3 stay whole
        ("H100", (2, 3), 2, [0, 1]),
        ("H20", (0, 1, 2, 3), 4, [4, 5, 6, 7]),
    ],
    ids=["pair-beside-used-pair", "pair-away-from-used-half", "single-beside-used", "h100-pair", "h20-other-half"],
)
def test_bin_packing_keeps_the_larger_partitions_whole(
    model: str, used: tuple[int, ...], gpus: int, want: list[int]
) -> None:
    assert minors(allocate(cache_with(hopper(model), *used), make_pod(nvidia_gpu=gpus))) == want


def test_no_free_partition_of_the_count_is_insufficient_and_says_what_holds_each() -> None:
    result = rejected(allocate(cache_with(hopper(), 1, 5), make_pod(nvidia_gpu=4)))
    assert (result.code, result.reason) == (Code.UNSCHEDULABLE, reasons.INSUFFICIENT_PARTITIONED)
    assert result.details == (
        "4-GPU partitions (built-in table for H800, node.koordinator.sh/gpu-partition-policy=Honor): "
        "[0,1,2,3] GPU 1 is in use; [4,5,6,7] GPU 5 is in use",
    )


def test_honor_refuses_gpus_that_are_free_but_not_a_partition() -> None:
    # Two free GPUs, 0 and 2, on different pairs: no 2-GPU partition is free.
    result = rejected(allocate(cache_with(hopper(), 1, 3, 4, 5, 6, 7), make_pod(nvidia_gpu=2)))
    assert result.reason == reasons.INSUFFICIENT_PARTITIONED


def test_prefer_places_three_gpus_without_partitions() -> None:
    # Koordinator's "H100; gpuPartitionPolicyPrefer" case: 3 GPUs have no partition, so they go
    # where the topology rules put them (one NUMA node, beside nothing used).
    assert minors(allocate(cache_with(hopper("H100", PREFER), 2, 3), make_pod(nvidia_gpu=3))) == [4, 5, 6]


def test_prefer_takes_a_free_partition_and_falls_back_when_none_is() -> None:
    assert minors(allocate(cache_with(hopper("H100", PREFER), 2), make_pod(nvidia_gpu=2))) == [0, 1]
    assert minors(allocate(cache_with(hopper("H100", PREFER), 1, 3, 4, 5, 6, 7), make_pod(nvidia_gpu=2))) == [0, 2]


def test_any_policy_value_but_honor_is_prefer() -> None:
    node = hopper(policy={names.LABEL_GPU_PARTITION_POLICY: "honor"})
    assert minors(allocate(cache_with(node, 1, 3, 4, 5, 6, 7), make_pod(nvidia_gpu=2))) == [0, 2]


def test_a_share_of_a_gpu_is_placed_as_without_partitions() -> None:
    result = allocate(cache_with(hopper(), 0, 1, 2, 3, 4, 5, 6), make_pod(gpu_core=50, gpu_ratio=50))
    assert minors(result) == [7]


def test_an_unknown_model_or_another_vendor_has_no_built_in_table() -> None:
    for node in (hopper("H100-80GB-HBM3", PREFER), hopper("H200", PREFER)):
        assert minors(allocate(cache_with(node, 1, 3, 4, 5, 6, 7), make_pod(nvidia_gpu=2))) == [0, 2]
    amd = hopper("H100", {**PREFER, names.LABEL_GPU_VENDOR: "amd"})
    assert minors(allocate(cache_with(amd, 2), make_pod(nvidia_gpu=2))) == [0, 1]


def test_honor_without_a_table_refuses_whole_gpus_for_good() -> None:
    node = make_node("n1", labels=HONOR)  # an A100 node: no built-in table
    result = rejected(allocate(cache_with(node), make_pod(nvidia_gpu=1)))
    assert (result.code, result.reason) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons.MISSING_PARTITION_TABLE)


def test_an_unhealthy_gpu_keeps_its_partitions_from_pods() -> None:
    result = allocate(cache_with(hopper(unhealthy_gpus=frozenset({0}))), make_pod(nvidia_gpu=2))
    assert minors(result) == [2, 3]
    result = rejected(allocate(cache_with(hopper(unhealthy_gpus=frozenset({0})), 4), make_pod(nvidia_gpu=4)))
    assert result.details[0].endswith("[0,1,2,3] GPU 0 is unhealthy; [4,5,6,7] GPU 4 is in use")


def test_a_partition_outside_the_pods_selector_is_not_free() -> None:
    node, device = hopper()
    gpus = tuple(
        dataclasses.replace(d, labels={"pool": "a" if d.minor < 4 else "b"}) if d.type.value == "gpu" else d
        for d in device.devices
    )
    device = dataclasses.replace(device, devices=gpus)
    selector = labelsel.LabelSelector(match_labels={"pool": "b"})
    hint = {names.ANNOTATION_DEVICE_ALLOCATE_HINT: '{"gpu":{"selector":' + json.dumps(selector.to_dict()) + "}}"}
    assert minors(allocate(cache_with((node, device)), make_pod(nvidia_gpu=2, annotations=hint))) == [4, 5]


# --- the pod's gpu-partition-spec ----------------------------------------------------------------------
#: Two tiers: allocationScore 1 holds the pairs 0-1 and 2-3, score 2 the pairs 4-5 and 6-7
#: (Koordinator's order: ascending score).
TIERED = PartitionTable.of(
    {
        2: [
            GPUPartition((0, 1), "NVLink", quantity.parse("400Gi"), 1),
            GPUPartition((2, 3), "NVLink", quantity.parse("400Gi"), 1),
            GPUPartition((4, 5), "NVLink", quantity.parse("100Gi"), 2),
            GPUPartition((6, 7), "NVLink", None, 2),
        ]
    }
)


def with_table(
    table: PartitionTable, policy: Mapping[str, str] = PREFER, *, node_labels: Mapping[str, str] = PREFER
) -> tuple[Node, Device]:
    """An A100 node (no built-in table) whose Device carries `table` and the policy label."""
    node, device = make_node("n1", labels=dict(node_labels))
    meta = dataclasses.replace(
        device.meta,
        labels=dict(policy),
        annotations={names.ANNOTATION_GPU_PARTITIONS: partitions.encode_table(table)},
    )
    return node, Device.from_dict(dataclasses.replace(device, meta=meta).to_dict())


def test_restricted_looks_at_the_first_tier_only() -> None:
    pod = make_pod(nvidia_gpu=2, annotations=spec('{"allocatePolicy":"Restricted"}'))
    assert minors(allocate(cache_with(with_table(TIERED), 4), pod)) == [0, 1]
    result = rejected(allocate(cache_with(with_table(TIERED), 0, 2), pod))
    assert result.reason == reasons.INSUFFICIENT_PARTITIONED
    assert "(first tier only: Restricted)" in result.details[0]


def test_best_effort_goes_on_to_the_next_tier() -> None:
    for text in ('{"allocatePolicy":"BestEffort"}', "{}", "null", '{"allocatePolicy":"Whatever"}'):
        pod = make_pod(nvidia_gpu=2, annotations=spec(text))
        assert minors(allocate(cache_with(with_table(TIERED), 0, 2), pod)) == [4, 5], text


def test_a_spec_binds_the_pod_even_on_a_prefer_node() -> None:
    pod = make_pod(nvidia_gpu=2, annotations=spec("{}"))
    result = rejected(allocate(cache_with(with_table(TIERED), 0, 2, 4, 6), pod))
    assert result.reason == reasons.INSUFFICIENT_PARTITIONED
    assert "binding for the pod (scheduling.koordinator.sh/gpu-partition-spec, BestEffort)" in result.details[0]
    # Without the spec the same node places the pod anyway (Prefer).
    assert minors(allocate(cache_with(with_table(TIERED), 0, 2, 4, 6), make_pod(nvidia_gpu=2))) == [1, 3]


def test_a_spec_on_a_node_without_partitions_is_refused_for_good() -> None:
    pod = make_pod(nvidia_gpu=1, annotations=spec('{"allocatePolicy":"BestEffort"}'))
    result = rejected(allocate(cache_with(make_node("n1")), pod))
    assert (result.code, result.reason) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons.MISSING_PARTITION_TABLE)


def test_ring_bus_bandwidth_skips_partitions_that_offer_less_or_say_nothing() -> None:
    pod = make_pod(nvidia_gpu=2, annotations=spec('{"ringBusBandwidth":"200Gi"}'))
    assert minors(allocate(cache_with(with_table(TIERED), 0), pod)) == [2, 3]
    result = rejected(allocate(cache_with(with_table(TIERED), 0, 2), pod))
    assert "[4,5] offers 100Gi ringBusBandwidth, below 200Gi; [6,7] offers no ringBusBandwidth" in result.details[0]


# --- the Device's table and policy win over the Node's -------------------------------------------------
def test_the_devices_table_comes_with_the_devices_policy_label() -> None:
    # The Node says Honor but the Device, which has the table, says Prefer: Prefer.
    node = with_table(TIERED, PREFER, node_labels=HONOR)
    assert minors(allocate(cache_with(node, 0, 2, 4, 6), make_pod(nvidia_gpu=2))) == [1, 3]
    node = with_table(TIERED, HONOR)
    assert rejected(allocate(cache_with(node, 0, 2, 4, 6), make_pod(nvidia_gpu=2))).reason == (
        reasons.INSUFFICIENT_PARTITIONED
    )


def test_a_malformed_device_table_falls_back_to_the_built_in_one() -> None:
    node, device = hopper()
    meta = dataclasses.replace(device.meta, annotations={names.ANNOTATION_GPU_PARTITIONS: "{oops"})
    device = Device.from_dict(dataclasses.replace(device, meta=meta).to_dict())
    assert device.gpu_partitions is None and "not valid JSON" in device.partition_problems[0]
    assert minors(allocate(cache_with((node, device), 4), make_pod(nvidia_gpu=1))) == [5]


# --- through the scheduler: the spec is parsed once, labels are watched --------------------------------
def test_a_malformed_spec_rejects_the_pod_naming_the_annotation() -> None:
    scheduler = make_scheduler(hopper())
    outcome = scheduler.schedule_one(make_pod("bad", nvidia_gpu=2, annotations=spec("{oops")))
    assert outcome.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "annotation scheduling.koordinator.sh/gpu-partition-spec: not valid JSON" in outcome.status.message


def test_relabelling_the_node_changes_what_fits() -> None:
    node, device = hopper(policy=PREFER)
    scheduler = make_scheduler((node, device))
    for minor in (1, 3, 4, 5, 6, 7):
        scheduler.cache.add_pod(bound_pod(f"held-{minor}", "n1", gpu_alloc(minor), nvidia_gpu=1))
    assert allocated(scheduler.schedule_one(make_pod("pair", nvidia_gpu=2)).annotations) == {"gpu": [0, 2]}
    scheduler.cache.remove_pod(next(p.pod for p in scheduler.cache.pods() if p.key == "default/pair"))
    honor = dataclasses.replace(node, meta=dataclasses.replace(node.meta, labels={**node.labels, **HONOR}))
    scheduler.cache.update_node(honor)
    outcome = scheduler.schedule_one(make_pod("pair-again", nvidia_gpu=2))
    assert not outcome.scheduled
    assert outcome.diagnosis.reasons_by_node()["n1"][0] == reasons.INSUFFICIENT_PARTITIONED
