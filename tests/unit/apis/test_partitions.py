"""GPU partitions in the protocol layer: Koordinator's names and shapes, read as its decoder reads
them (never refusing what it accepts), the built-in Hopper table and the node resolution."""

from __future__ import annotations

import json

import pytest

from apis.crds.device import Device
from apis.errors import AnnotationError
from apis.extension import names, partitions
from apis.extension.partitions import AllocatePolicy, GPUPartition, PartitionPolicy, PartitionTable
from apis.k8s import quantity


def test_names_are_koordinators() -> None:
    assert names.ANNOTATION_GPU_PARTITIONS == "scheduling.koordinator.sh/gpu-partitions"
    assert names.ANNOTATION_GPU_PARTITION_SPEC == "scheduling.koordinator.sh/gpu-partition-spec"
    assert names.LABEL_GPU_PARTITION_POLICY == "node.koordinator.sh/gpu-partition-policy"


def test_the_hopper_table_is_koordinators() -> None:
    table = partitions.HOPPER_TABLE
    assert table.sizes() == (1, 2, 4, 8)
    assert [p.minors for p in table.of_size(2) or ()] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert [p.minors for p in table.of_size(4) or ()] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert all(p.link_type == "NVLink" and p.allocation_score == 1 for _, ps in table.entries for p in ps)
    assert table.of_size(3) is None


def test_a_koordinator_table_reads_and_writes_back_the_same() -> None:
    text = json.dumps(
        {
            "2": [
                {"minors": [1, 0], "gpuLinkType": "NVLink", "ringBusBandwidth": "400Gi", "allocationScore": 2},
                {"minors": [2, 3], "unknownField": True},
            ],
            "1": [{"minors": [0]}],
        }
    )
    table, problems = partitions.decode_table(text)
    assert problems == ()
    assert table.of_size(2) == (
        GPUPartition((0, 1), "NVLink", quantity.parse("400Gi"), 2),
        GPUPartition((2, 3)),
    )
    again, _ = partitions.decode_table(partitions.encode_table(table))
    assert again == table
    assert json.loads(partitions.encode_table(table))["2"][0] == {
        "minors": [0, 1],
        "gpuLinkType": "NVLink",
        "ringBusBandwidth": "400Gi",
        "allocationScore": 2,
    }


def test_tiers_run_in_ascending_allocation_score_as_koordinators_code_sorts_them() -> None:
    table = PartitionTable.of({2: [GPUPartition((0, 1), allocation_score=3), GPUPartition((2, 3), allocation_score=1)]})
    assert [[p.minors for p in tier] for tier in table.tiers(2)] == [[(2, 3)], [(0, 1)]]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"2":[{"minors":[0,1,2]}]}', "partition 2[0] has 3 GPUs, not 2: left out"),
        ('{"2":[{"minors":[1,1]}]}', "partition 2[0] names a GPU twice: left out"),
        ('{"1":[{"minors":[-1]}]}', "partition 1[0] names a negative GPU minor: left out"),
    ],
    ids=["count-mismatch", "repeated-gpu", "negative-minor"],
)
def test_partitions_that_cannot_be_honoured_safely_are_left_out_with_a_reason(text: str, problem: str) -> None:
    table, problems = partitions.decode_table(text)
    assert problems == (problem,)
    assert all(not ps for _, ps in table.entries)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{oops", "not valid JSON"),
        ("null", "expected a JSON object"),
        ('{"two":[]}', "key 'two' is not a GPU count"),
        ('{"2":{}}', "2: expected a list of partitions"),
        ('{"2":[{"minors":["0"]}]}', "2[0].minors: expected a list of GPU minors"),
        ('{"2":[{"minors":[0,1],"allocationScore":"1"}]}', "2[0].allocationScore: expected an integer"),
        ('{"2":[{"minors":[0,1],"ringBusBandwidth":"fast"}]}', "2[0].ringBusBandwidth"),
    ],
)
def test_what_koordinators_decoder_refuses_is_an_annotation_error(text: str, message: str) -> None:
    with pytest.raises(AnnotationError, match="scheduling.koordinator.sh/gpu-partitions") as caught:
        partitions.decode_table(text, obj="device n1")
    assert message in str(caught.value) and "device n1" in str(caught.value)


def test_a_device_with_a_bad_table_is_still_read_and_says_why() -> None:
    raw = {
        "metadata": {"name": "n1", "annotations": {names.ANNOTATION_GPU_PARTITIONS: '{"2": 5}'}},
        "spec": {"devices": []},
    }
    device = Device.from_dict(raw)
    assert device.gpu_partitions is None
    assert device.partition_problems == ("2: expected a list of partitions: the Device's GPU partitions are not used",)
    assert device.to_dict()["metadata"]["annotations"] == raw["metadata"]["annotations"]  # kept as written


def test_an_empty_table_annotation_is_no_table() -> None:
    raw = {"metadata": {"name": "n1", "annotations": {names.ANNOTATION_GPU_PARTITIONS: ""}}, "spec": {"devices": []}}
    assert Device.from_dict(raw).gpu_partitions is None


@pytest.mark.parametrize(
    ("text", "policy", "bandwidth"),
    [
        ('{"allocatePolicy":"Restricted","ringBusBandwidth":"200Gi"}', AllocatePolicy.RESTRICTED, "200Gi"),
        ('{"allocatePolicy":"BestEffort"}', AllocatePolicy.BEST_EFFORT, None),
        ("{}", AllocatePolicy.BEST_EFFORT, None),
        ("null", AllocatePolicy.BEST_EFFORT, None),
        ('{"allocatePolicy":"restricted"}', AllocatePolicy.BEST_EFFORT, None),  # Koordinator compares exactly
    ],
)
def test_pod_specs_read_as_koordinator_reads_them(text: str, policy: AllocatePolicy, bandwidth: str | None) -> None:
    found = partitions.decode_spec(text)
    assert found.allocate_policy is policy
    assert found.ring_bus_bandwidth == (quantity.parse(bandwidth) if bandwidth else None)
    assert partitions.decode_spec(partitions.encode_spec(found)) == found


@pytest.mark.parametrize("text", ["", "{oops", "[]", '{"allocatePolicy":1}', '{"ringBusBandwidth":"x"}'])
def test_a_pod_spec_koordinator_refuses_is_an_annotation_error(text: str) -> None:
    with pytest.raises(AnnotationError, match="gpu-partition-spec"):
        partitions.spec_from_annotations({names.ANNOTATION_GPU_PARTITION_SPEC: text}, obj="pod default/p")


def test_no_spec_annotation_is_no_spec() -> None:
    assert partitions.spec_from_annotations({}) is None


def test_only_the_exact_word_honor_honours() -> None:
    assert partitions.policy_from_labels({names.LABEL_GPU_PARTITION_POLICY: "Honor"}) is PartitionPolicy.HONOR
    for value in ("Prefer", "honor", "", "Yes"):
        assert partitions.policy_from_labels({names.LABEL_GPU_PARTITION_POLICY: value}) is PartitionPolicy.PREFER
    assert partitions.policy_from_labels({}) is PartitionPolicy.PREFER


def test_resolve_follows_koordinator() -> None:
    honor = {names.LABEL_GPU_PARTITION_POLICY: "Honor"}
    own = PartitionTable.of({1: [GPUPartition((0,))]})
    # The Device's table comes with the Device's label, whatever the Node says.
    found = partitions.resolve(own, {}, {**honor, names.LABEL_GPU_MODEL: "H100"})
    assert found is not None and (found.table, found.policy) == (own, PartitionPolicy.PREFER)
    # Else the built-in table for an exact model, with the Node's label.
    found = partitions.resolve(None, honor, {**honor, names.LABEL_GPU_MODEL: "H800"})
    assert found is not None and (found.table, found.honor) == (partitions.HOPPER_TABLE, True)
    assert found.source == "built-in table for H800"
    assert partitions.resolve(None, {}, {names.LABEL_GPU_MODEL: "H100-80GB-HBM3"}) is None
    assert partitions.resolve(None, {}, {names.LABEL_GPU_MODEL: "H20", names.LABEL_GPU_VENDOR: "amd"}) is None
    # Honor without any table is kept: it refuses whole GPUs.
    found = partitions.resolve(None, {}, honor)
    assert found is not None and found.table is None and found.honor
