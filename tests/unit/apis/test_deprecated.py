"""Koordinator's deprecated device names (`kubernetes.io/gpu-core`, ...) at every parse boundary of
`apis`: the rule itself, pods, Nodes, Device CRs, device-allocated annotations and the request
rules. Past these parsers only the `koordinator.sh/` names exist."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.crds.device import Device, DeviceType
from apis.errors import InvalidRequestError
from apis.extension import allocation, deprecated, devicetypes, names
from apis.extension.devicerequest import device_requests, pod_device_requests
from apis.k8s.core import Node, Pod

GI = 2**30
OLD_CORE, OLD_MEM, OLD_RATIO = names.DEPRECATED_GPU_CORE, names.DEPRECATED_GPU_MEMORY, names.DEPRECATED_GPU_MEMORY_RATIO
CORE, MEM, RATIO = names.GPU_CORE, names.GPU_MEMORY, names.GPU_MEMORY_RATIO


def pod(*containers: dict[str, Any], overhead: dict[str, str] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(containers)]}
    if overhead is not None:
        spec["overhead"] = overhead
    return Pod.from_dict({"metadata": {"name": "p", "namespace": "default"}, "spec": spec})


# --- the names and the rule -----------------------------------------------------------------------
def test_the_deprecated_names_are_koordinators() -> None:
    # Koordinator's apis/extension/deprecated.go: DeprecatedDeviceResourcesMapper.
    assert dict(devicetypes.DEPRECATED_NAMES) == {
        "kubernetes.io/gpu": "koordinator.sh/gpu",
        "kubernetes.io/gpu-core": "koordinator.sh/gpu-core",
        "kubernetes.io/gpu-memory": "koordinator.sh/gpu-memory",
        "kubernetes.io/gpu-memory-ratio": "koordinator.sh/gpu-memory-ratio",
        "kubernetes.io/rdma": "koordinator.sh/rdma",
        "kubernetes.io/fpga": "koordinator.sh/fpga",
    }


def test_each_deprecated_name_is_renamed() -> None:
    got = deprecated.to_current({OLD_CORE: 50, OLD_RATIO: 50, "cpu": 1000, names.DEPRECATED_RDMA: 100})
    assert got == {CORE: 50, RATIO: 50, "cpu": 1000, names.RDMA: 100}


def test_a_list_without_deprecated_names_is_returned_as_it_is() -> None:
    current = {CORE: 50, RATIO: 50}
    assert deprecated.to_current(current) is current


def test_the_current_name_wins_and_the_deprecated_one_is_left_beside_it() -> None:
    # Koordinator's replaceAndEraseResource: nothing is added up, the deprecated entry stays.
    both = {OLD_CORE: 30, CORE: 50, OLD_RATIO: 50}
    got = deprecated.to_current(both)
    assert got == {OLD_CORE: 30, CORE: 50, RATIO: 50}
    assert deprecated.shadowed(got) == {OLD_CORE: CORE}
    assert deprecated.shadowed({CORE: 50, RATIO: 50}) == {}


# --- pods -----------------------------------------------------------------------------------------
def test_a_pod_in_deprecated_names_reads_as_the_current_one() -> None:
    old = pod({"limits": {OLD_CORE: "50", OLD_RATIO: "50"}})
    new = pod({"limits": {CORE: "50", RATIO: "50"}})
    assert old.requests() == new.requests() == {CORE: 50, RATIO: 50}
    assert old.containers[0].limits == {CORE: 50, RATIO: 50}
    assert pod_device_requests(old) == pod_device_requests(new)


def test_bytes_keep_their_unit() -> None:
    assert pod({"limits": {OLD_CORE: "50", OLD_MEM: "8Gi"}}).requests() == {CORE: 50, MEM: 8 * GI}


def test_containers_in_different_spellings_add_up() -> None:
    got = pod({"limits": {OLD_CORE: "30", OLD_RATIO: "30"}}, {"requests": {CORE: "20", RATIO: "20"}}).requests()
    assert got == {CORE: 50, RATIO: 50}


def test_init_containers_and_overhead_are_read_too() -> None:
    got = pod({"limits": {CORE: "10", RATIO: "10"}}, overhead={OLD_CORE: "5"})
    assert got.requests() == {CORE: 15, RATIO: 10}
    init = Pod.from_dict(
        {
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [{"name": "i", "resources": {"limits": {OLD_CORE: "40", OLD_RATIO: "40"}}}],
                "containers": [{"name": "c", "resources": {"limits": {CORE: "20", RATIO: "20"}}}],
            },
        }
    )
    assert init.requests() == {CORE: 40, RATIO: 40}


def test_a_request_defaulted_from_a_deprecated_limit_follows_the_stored_object() -> None:
    # kube-apiserver copies the limit into requests before anyone reads the pod: requests then
    # hold both spellings of gpu-core, which is one resource asked for twice.
    mixed = pod({"limits": {OLD_CORE: "50"}, "requests": {CORE: "50", RATIO: "50"}})
    assert mixed.requests() == {OLD_CORE: 50, CORE: 50, RATIO: 50}


def test_one_resource_in_both_spellings_is_refused_naming_both() -> None:
    mixed = pod({"limits": {OLD_CORE: "50", CORE: "50", OLD_RATIO: "50"}})
    with pytest.raises(InvalidRequestError) as e:
        pod_device_requests(mixed)
    assert str(e.value) == (
        "pod default/p: invalid device request: kubernetes.io/gpu-core and koordinator.sh/gpu-core are the same "
        "resource (kubernetes.io/gpu-core is its deprecated name): ask for koordinator.sh/gpu-core only"
    )
    assert e.value.resources == (OLD_CORE, CORE)


def test_the_request_rules_read_a_raw_resource_list_in_deprecated_names() -> None:
    # Callers that build resource lists themselves (not through Pod.from_dict) get the same answer.
    assert device_requests({OLD_CORE: 50, OLD_RATIO: 50}) == device_requests({CORE: 50, RATIO: 50})


# --- nodes ----------------------------------------------------------------------------------------
NODE = {
    "metadata": {"name": "n1"},
    "status": {
        "capacity": {OLD_CORE: "800", OLD_MEM: "640Gi", "cpu": "64"},
        "allocatable": {OLD_CORE: "800", OLD_MEM: "640Gi", "cpu": "64"},
    },
}


def test_a_node_published_by_an_older_koordinator_reads_in_current_names() -> None:
    node = Node.from_dict(NODE)
    assert node.allocatable == node.capacity == {CORE: 800, MEM: 640 * GI, "cpu": 64_000}


def test_the_controller_sees_the_node_as_written() -> None:
    node = Node.from_dict_as_written(NODE)
    assert node.allocatable == {OLD_CORE: 800, OLD_MEM: 640 * GI, "cpu": 64_000}


# --- Device CRs -----------------------------------------------------------------------------------
def test_a_device_cr_in_deprecated_names_reads_in_current_names() -> None:
    device = Device.from_dict(
        {
            "metadata": {"name": "n1"},
            "spec": {
                "devices": [
                    {
                        "type": "gpu",
                        "minor": 0,
                        "health": True,
                        "resources": {OLD_CORE: "100", OLD_MEM: "80Gi", OLD_RATIO: "100"},
                    },
                    {"type": "rdma", "minor": 0, "health": True, "resources": {names.DEPRECATED_RDMA: "100"}},
                ]
            },
        }
    )
    gpu, rdma = device.devices
    assert gpu.resources == {CORE: 100, MEM: 80 * GI, RATIO: 100}
    assert rdma.resources == {names.RDMA: 100}
    # Written back (the agent's next update) in the current names only.
    assert device.to_dict()["spec"]["devices"][0]["resources"] == {CORE: "100", MEM: "80Gi", RATIO: "100"}


# --- device-allocated annotations -----------------------------------------------------------------
def test_an_annotation_from_an_older_scheduler_reads_in_current_names() -> None:
    text = json.dumps({"gpu": [{"minor": 3, "resources": {OLD_CORE: "50", OLD_MEM: "40Gi", OLD_RATIO: "50"}}]})
    (gpu,) = allocation.decode(text)[DeviceType.GPU]
    assert gpu.resources == {CORE: 50, MEM: 40 * GI, RATIO: 50}
    assert allocation.encode({DeviceType.GPU: (gpu,)}) == (
        '{"gpu":[{"minor":3,"resources":{"koordinator.sh/gpu-core":"50","koordinator.sh/gpu-memory":"40Gi",'
        '"koordinator.sh/gpu-memory-ratio":"50"}}]}'
    )


@pytest.mark.parametrize(
    ("labels", "model"),
    [
        ({names.LABEL_GPU_MODEL: "A100-SXM4-80GB"}, "A100-SXM4-80GB"),
        ({names.DEPRECATED_LABEL_GPU_MODEL: "Tesla-T4"}, "Tesla-T4"),
        ({names.LABEL_GPU_MODEL: "H100", names.DEPRECATED_LABEL_GPU_MODEL: "Tesla-T4"}, "H100"),
        ({names.LABEL_GPU_MODEL: "", names.DEPRECATED_LABEL_GPU_MODEL: "Tesla-T4"}, ""),
        ({}, ""),
    ],
    ids=["current", "deprecated-only", "current-wins", "current-empty-wins", "neither"],
)
def test_a_nodes_gpu_model_falls_back_to_the_deprecated_label(labels: dict[str, str], model: str) -> None:
    assert deprecated.gpu_model(labels) == model
