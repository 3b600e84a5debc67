"""The GPU partition table and policy label the agent writes on its Device: the built-in Hopper
table for known models, else one from NVLink (through the fake NVML boundary), else none."""

from __future__ import annotations

import dataclasses
import json

import pytest

from agent.devices.cr import build_device
from agent.devices.reporter import _merged, _same
from agent.discovery.fake_nvml import FakeNVML
from agent.discovery.simulated import load_profile
from apis.crds.device import Device
from apis.extension import names, partitions
from apis.extension.partitions import PartitionPolicy
from apis.k8s.meta import ObjectMeta
from tests.support.nvml import NODE
from tests.support.sysfs_tree import SysfsTree

from .test_device_cr import Node


def table_of(device: Device) -> dict[int, list[list[int]]]:
    text = device.to_dict()["metadata"]["annotations"][names.ANNOTATION_GPU_PARTITIONS]
    return {int(n): [p["minors"] for p in parts] for n, parts in json.loads(text).items()}


def discovered(sysfs: SysfsTree, fake_nvml: FakeNVML) -> Device:
    """The Device the agent builds for the fixture node, discovered through `fake_nvml`."""
    node = Node(sysfs, fake_nvml)
    try:
        return node.device()
    finally:
        node.monitor.stop()
        node.stack.close()


def test_an_h100_node_gets_koordinators_hopper_table_and_prefer() -> None:
    device = build_device(load_profile("h100-8x").inventory(NODE), {}, node_name=NODE)
    assert device.meta.labels[names.LABEL_GPU_MODEL] == "H100-80GB-HBM3"  # not Koordinator's exact "H100"
    assert device.gpu_partitions == partitions.HOPPER_TABLE
    assert device.meta.labels[names.LABEL_GPU_PARTITION_POLICY] == "Prefer"
    assert Device.from_dict(device.to_dict()).gpu_partitions == partitions.HOPPER_TABLE


def test_the_policy_label_is_the_agents_setting() -> None:
    inventory = load_profile("h100-8x").inventory(NODE)
    device = build_device(inventory, {}, node_name=NODE, partition_policy=PartitionPolicy.HONOR)
    assert device.meta.labels[names.LABEL_GPU_PARTITION_POLICY] == "Honor"


def test_an_nvswitch_node_of_another_model_gets_aligned_runs_from_nvlink() -> None:
    device = build_device(load_profile("a100-8x").inventory(NODE), {}, node_name=NODE)
    table = table_of(device)
    assert table[2] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert table[4] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert table[8] == [list(range(8))]
    assert table[1] == [[m] for m in range(8)]


def test_bridged_pairs_give_the_pairs_and_every_gpu_alone() -> None:
    device = build_device(load_profile("a100-pcie-4x").inventory(NODE), {}, node_name=NODE)
    assert table_of(device) == {1: [[0], [1], [2], [3]], 2: [[0, 1], [2, 3]]}


def test_no_nvlink_and_no_known_model_writes_neither_table_nor_label() -> None:
    device = build_device(load_profile("t4-2x").inventory(NODE), {}, node_name=NODE)
    assert names.ANNOTATION_GPU_PARTITIONS not in device.to_dict()["metadata"].get("annotations", {})
    assert names.LABEL_GPU_PARTITION_POLICY not in device.meta.labels


@pytest.mark.parametrize(
    ("name", "hopper"),
    [("NVIDIA H800", True), ("NVIDIA H20", True), ("NVIDIA H100 PCIe", True), ("NVIDIA H200", False)],
)
def test_known_models_are_recognised_through_nvml(
    sysfs: SysfsTree, fake_nvml: FakeNVML, name: str, hopper: bool
) -> None:
    for gpu in fake_nvml.gpus:
        gpu.name = name
    device = discovered(sysfs, fake_nvml)
    # The fixture's GPUs have no NVLink: only a known model gets a table.
    assert (device.gpu_partitions == partitions.HOPPER_TABLE) is hopper
    assert (device.gpu_partitions is None) is not hopper


def test_nvlink_from_the_nvml_boundary_gives_the_table(sysfs: SysfsTree, fake_nvml: FakeNVML) -> None:
    for gpu in fake_nvml.gpus:
        gpu.nvlink_bridge = f"bridge-{gpu.minor // 2}"  # pairs 0-1, 2-3, ...
    device = discovered(sysfs, fake_nvml)
    assert table_of(device)[2] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert 4 not in table_of(device)


def test_partly_linked_gpus_give_only_their_linked_pairs() -> None:
    inventory = load_profile("a100-pcie-4x").inventory(NODE)
    gpus = list(inventory.gpus)
    gpus[1] = dataclasses.replace(gpus[1], nvlink_peers=(0, 2))  # a chain 0-1-2-3: not all to all
    device = build_device(dataclasses.replace(inventory, gpus=tuple(gpus)), {}, node_name=NODE)
    assert table_of(device)[2] == [[0, 1], [1, 2], [2, 3]]


def test_the_reporter_replaces_its_annotation_and_keeps_others() -> None:
    wanted = build_device(load_profile("h100-8x").inventory(NODE), {}, node_name=NODE)
    server = ObjectMeta(
        name=NODE,
        annotations={names.ANNOTATION_GPU_PARTITIONS: '{"1":[{"minors":[0]}]}', "team.example/owner": "ml"},
        labels={names.LABEL_GPU_PARTITION_POLICY: "Honor", "team.example/pool": "a"},
        resource_version="7",
    )
    merged = _merged(server, wanted)
    assert merged.meta.annotations["team.example/owner"] == "ml"
    assert merged.meta.labels["team.example/pool"] == "a"
    assert merged.meta.labels[names.LABEL_GPU_PARTITION_POLICY] == "Prefer"
    current = Device.from_dict(dataclasses.replace(wanted, meta=server).to_dict())
    assert not _same(current, merged)  # the edited table and label are put back
    assert _same(Device.from_dict(merged.to_dict()), merged)
