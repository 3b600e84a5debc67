"""kube-apiserver's resource rules, one at a time: what each refuses, with kube's path and message."""

from typing import Any

import pytest

from apis.extension import names
from apiserver import requirements
from apiserver.errors import Cause, StatusError

PATH = "spec.containers[0].resources"


def causes(limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None) -> list[dict[str, str]]:
    raw: dict[str, Any] = {}
    if limits is not None:
        raw["limits"] = limits
    if requests is not None:
        raw["requests"] = requests
    return [c.to_dict() for c in requirements.validate_requirements(raw, PATH)]


def invalid(field: str, message: str) -> dict[str, str]:
    return {"field": f"{PATH}.{field}", "message": message, "reason": "FieldValueInvalid"}


@pytest.mark.parametrize(
    ("limits", "requests"),
    [
        ({names.NVIDIA_GPU: "2"}, {names.NVIDIA_GPU: "2"}),
        ({names.NVIDIA_GPU: 1}, {names.NVIDIA_GPU: "1"}),
        ({names.GPU_MEMORY: "10Gi"}, {names.GPU_MEMORY: "10Gi"}),
        ({names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}, {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}),
        ({names.CPU: "2", names.MEMORY: "1Gi"}, {names.CPU: "500m", names.MEMORY: "512Mi"}),
        (None, {names.CPU: "1.5", names.MEMORY: "1Gi"}),
        ({"kubernetes.io/gpu-core": "12.5"}, {"kubernetes.io/gpu-core": "12.5"}),
        ({names.BATCH_CPU: "2"}, {names.BATCH_CPU: "500m"}),
        ({names.MEMORY: "1Gi", "hugepages-2Mi": "4Mi"}, {names.MEMORY: "1Gi", "hugepages-2Mi": "4Mi"}),
        ({}, {}),
    ],
    ids=[
        "whole-gpus",
        "number-and-string-equal",
        "gpu-memory-in-bytes",
        "gpu-share-in-percent",
        "cpu-memory-overcommitted",
        "requests-without-limits-for-native",
        "kubernetes.io-domain-is-native",
        "batch-cpu-is-native",
        "whole-hugepages-with-memory",
        "empty",
    ],
)
def test_what_kube_accepts_is_accepted(limits: dict[str, Any] | None, requests: dict[str, Any] | None) -> None:
    assert causes(limits, requests) == []


def test_a_fractional_extended_resource_is_not_an_integer() -> None:
    assert causes({names.NVIDIA_GPU: 0.5}, {names.NVIDIA_GPU: "0.5"}) == [
        invalid("limits[nvidia.com/gpu]", 'Invalid value: "500m": must be an integer'),
        invalid("requests[nvidia.com/gpu]", 'Invalid value: "500m": must be an integer'),
    ]


@pytest.mark.parametrize("name", [names.GPU_CORE, names.GPU_MEMORY_RATIO, names.RDMA, names.FPGA])
def test_a_percentage_resource_also_says_what_it_counts(name: str) -> None:
    (only,) = causes({name: "12.5"}, {name: "12.5"})[:1]
    assert only == invalid(
        f"limits[{name}]",
        f'Invalid value: "12500m": must be an integer ({name} is a whole percent of one device: 100 = a whole device)',
    )


def test_extended_request_must_equal_its_limit() -> None:
    assert causes({names.NVIDIA_GPU: "2"}, {names.NVIDIA_GPU: "1"}) == [
        invalid("requests", 'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2')
    ]


def test_extended_request_needs_a_limit() -> None:
    assert causes(None, {names.NVIDIA_GPU: "1"}) == [
        {
            "field": f"{PATH}.limits",
            "message": "Required value: Limit must be set for non overcommitable resources",
            "reason": "FieldValueRequired",
        }
    ]


def test_native_request_is_at_most_its_limit() -> None:
    assert causes({names.CPU: "1", names.MEMORY: "1Gi"}, {names.CPU: "1500m", names.MEMORY: "2Gi"}) == [
        invalid("requests", 'Invalid value: "1500m": must be less than or equal to cpu limit of 1'),
        invalid("requests", 'Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi'),
    ]


@pytest.mark.parametrize("name", [names.CPU, names.NVIDIA_GPU, "kubernetes.io/gpu-core"])
def test_no_quantity_is_negative(name: str) -> None:
    assert causes({name: "-1"}, {name: "-1"}) == [
        invalid(f"limits[{name}]", 'Invalid value: "-1": must be greater than or equal to 0'),
        invalid(f"requests[{name}]", 'Invalid value: "-1": must be greater than or equal to 0'),
    ]


def test_hugepages_are_whole_pages_not_overcommitted_and_need_cpu_or_memory() -> None:
    assert causes({"hugepages-2Mi": "3Mi"}, {"hugepages-2Mi": "2Mi"}) == [
        invalid("limits[hugepages-2Mi]", 'Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi'),
        invalid("requests", 'Invalid value: "2Mi": must be equal to hugepages-2Mi limit of 3Mi'),
        {"field": PATH, "message": "Forbidden: HugePages require cpu or memory", "reason": "FieldValueForbidden"},
    ]


@pytest.mark.parametrize(
    ("name", "messages"),
    [
        ("gpu", ["must be a standard resource type or fully qualified", "must be a standard resource for containers"]),
        ("pods", ["must be a standard resource for containers"]),
        ("requests.example.com/gpu", ["doesn't follow extended resource name standard"]),
        (
            "example.com/a/b",
            ["a qualified name must have at most one '/'", "doesn't follow extended resource name standard"],
        ),
    ],
    ids=["no-domain", "quota-only", "quota-prefix", "two-slashes"],
)
def test_resource_names(name: str, messages: list[str]) -> None:
    got = causes({name: "1"}, {name: "1"})
    assert [c["message"] for c in got if c["field"].startswith(f"{PATH}.limits")] == [
        f'Invalid value: "{name}": {m}' for m in messages
    ]


def test_a_quantity_that_does_not_parse_is_named() -> None:
    assert causes({names.CPU: "lots"}) == [
        invalid(
            "limits[cpu]",
            'Invalid value: "lots": '
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        )
    ]


def test_checks_are_cached_by_type_so_true_is_not_one() -> None:
    assert causes({names.CPU: 1}) == []
    assert [c["field"] for c in causes({names.CPU: True})] == [f"{PATH}.limits[cpu]"]


def test_pod_checks_every_container_init_container_and_the_overhead() -> None:
    gpu = {"limits": {names.NVIDIA_GPU: "0.5"}}
    spec = {
        "containers": [{"name": "a", "resources": {}}, {"name": "b", "resources": gpu}],
        "initContainers": [{"name": "i", "resources": gpu}],
        "overhead": {names.CPU: "-1"},
    }
    assert [c.field for c in requirements.validate_pod(spec)] == [
        "spec.containers[1].resources.limits[nvidia.com/gpu]",
        "spec.initContainers[0].resources.limits[nvidia.com/gpu]",
        "spec.overhead.limits[cpu]",
    ]


def test_the_invalid_message_aggregates_as_kube_does() -> None:
    one = StatusError.invalid("Pod", "p", [Cause("a", "x")])
    two = StatusError.invalid("Pod", "p", [Cause("a", "x"), Cause("b", "y"), Cause("a", "x")])
    assert one.message == 'Pod "p" is invalid: a: x'
    assert two.message == 'Pod "p" is invalid: [a: x, b: y]'
    assert (two.code, two.reason, len(two.to_status()["details"]["causes"])) == (422, "Invalid", 3)
