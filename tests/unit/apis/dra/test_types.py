"""Parsing resource.k8s.io/v1 objects: kube's field names, defaults, and bad input named by path."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from apis.dra.allocation import AllocationResult
from apis.dra.claim import AllocationMode, DeviceClass, DeviceToleration, ResourceClaim
from apis.dra.slice import AttributeType, DeviceTaint, ResourceSlice
from apis.errors import ValidationError
from tests.unit.apis.dra.factories import exactly, gpu, make_claim, make_slice


def test_slice_reads_devices_attributes_capacity_counters_and_taints() -> None:
    s = make_slice(
        [
            gpu(
                "gpu-0",
                model="A100",
                minor=0,
                nvlink=True,
                _={
                    "capacity": {
                        "memory": {
                            "value": "80Gi",
                            "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}},
                        }
                    },
                    "allowMultipleAllocations": True,
                    "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}],
                    "taints": [{"key": "xid", "value": "79", "effect": "NoSchedule"}],
                },
            )
        ],
        counters=[{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}],
    )
    device = s.devices[0]
    assert s.driver == "gpu.tessera.io" and s.pool.name == "n1" and s.node_name == "n1"
    assert device.attributes["model"].type is AttributeType.STRING and device.attributes["model"].value == "A100"
    assert device.attributes["minor"].value == 0 and device.attributes["nvlink"].value is True
    assert device.capacity["memory"].value.amount == 80 * 2**30
    policy = device.capacity["memory"].request_policy
    assert policy is not None and policy.default is not None and policy.valid_range_step is not None
    assert device.allow_multiple_allocations
    assert device.consumes_counters[0].counter_set == "gpu-0"
    assert s.shared_counters[0].counters["memory"].amount == 80 * 2**30
    assert device.taints[0].prevents_allocation and str(device.taints[0]) == "xid=79:NoSchedule"
    assert ResourceSlice.from_dict(s.to_dict()) == s


def test_unqualified_attribute_is_the_drivers() -> None:
    device = make_slice(
        [gpu("g", model="A100", _={"attributes": {"model": {"string": "A100"}, "other.io/x": {"int": 1}}})]
    ).devices[0]
    assert device.attribute("gpu.tessera.io/model", "gpu.tessera.io") is not None
    assert device.attribute("other.io/model", "gpu.tessera.io") is None
    assert device.attribute("other.io/x", "gpu.tessera.io") is not None


@pytest.mark.parametrize(
    ("device", "field"),
    [
        ({"name": "g", "attributes": {"a": {"int": 1, "string": "x"}}}, "spec.devices[0].attributes.a"),
        ({"name": "g", "attributes": {"a": {"int": "1"}}}, "spec.devices[0].attributes.a.int"),
        ({"name": "g", "attributes": {"v": {"version": "1.2"}}}, "spec.devices[0].attributes.v.version"),
        ({"name": "g", "capacity": {"memory": {"value": "lots"}}}, "spec.devices[0].capacity.memory.value"),
        ({"name": "g", "capacity": {"memory": {}}}, "spec.devices[0].capacity.memory.value"),
        ({"name": ""}, "spec.devices[0].name"),
        (
            {"name": "g", "capacity": {"m": {"value": "1", "requestPolicy": {"validValues": ["2", "1"]}}}},
            "spec.devices[0].capacity.m.requestPolicy.validValues",
        ),
        ({"name": "g", "taints": [{"key": "k"}]}, "spec.devices[0].taints[0].effect"),
        ({"name": "g", "nodeName": "n1"}, "spec.devices[0]"),
    ],
    ids=[
        "two-values",
        "int-as-string",
        "bad-semver",
        "bad-quantity",
        "no-capacity-value",
        "no-name",
        "unsorted-valid-values",
        "taint-without-effect",
        "device-node-without-per-device",
    ],
)
def test_bad_slice_names_the_field(device: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as e:
        make_slice([device])
    assert e.value.field == field
    assert "resourceslice" in str(e.value)


def test_slice_must_say_where_its_devices_are() -> None:
    with pytest.raises(ValidationError, match="exactly one of nodeName"):
        make_slice([gpu("g")], node="")
    assert make_slice([gpu("g")], node="", allNodes=True).all_nodes


def test_claim_defaults_are_kubes() -> None:
    claim = make_claim(exactly("gpu", "gpu"))
    request = claim.spec.requests[0].exactly
    assert request is not None
    assert request.allocation_mode is AllocationMode.EXACT_COUNT and request.count == 1
    assert not request.admin_access and request.name == "gpu"


def test_claim_first_available_constraints_config_and_status() -> None:
    claim = make_claim(
        {
            "name": "gpu",
            "firstAvailable": [
                {"name": "big", "deviceClassName": "gpu", "count": 2},
                {"name": "small", "deviceClassName": "gpu"},
            ],
        },
        exactly("nic", "nic", allocationMode="All"),
        constraints=[{"requests": ["gpu/big", "nic"], "matchAttribute": "gpu.tessera.io/numa"}],
        config=[{"requests": ["gpu"], "opaque": {"driver": "gpu.tessera.io", "parameters": {"mps": True}}}],
        status={
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu/big",
                            "driver": "d",
                            "pool": "p",
                            "device": "g",
                            "shareID": "s",
                            "consumedCapacity": {"memory": "1Gi"},
                        }
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}],
        },
    )
    gpu_request, nic_request = claim.spec.requests
    assert [s.name for s in gpu_request.alternatives] == ["big", "small"] and gpu_request.alternatives[0].count == 2
    assert nic_request.exactly is not None and nic_request.exactly.allocation_mode is AllocationMode.ALL
    assert claim.spec.constraints[0].applies_to("gpu", "big") and not claim.spec.constraints[0].applies_to(
        "gpu", "small"
    )
    assert claim.spec.config[0].config.parameters == {"mps": True}
    assert claim.allocation is not None and claim.allocation.results[0].consumed_capacity["memory"].amount == 2**30
    assert claim.reserved_for[0].uid == "u"
    assert ResourceClaim.from_dict({"metadata": {"name": "c"}, "spec": claim.spec.to_dict()}).spec == claim.spec


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        ({"name": "r"}, "spec.devices.requests[0]"),
        (
            {
                "name": "r",
                "exactly": {"deviceClassName": "gpu"},
                "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}],
            },
            "spec.devices.requests[0]",
        ),
        ({"name": "r", "exactly": {}}, "spec.devices.requests[0].exactly.deviceClassName"),
        ({"name": "r", "exactly": {"deviceClassName": "gpu", "count": 0}}, "spec.devices.requests[0].exactly.count"),
        (
            {"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "Some"}},
            "spec.devices.requests[0].exactly.allocationMode",
        ),
        (
            {"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "All", "count": 2}},
            "spec.devices.requests[0].exactly.count",
        ),
        (
            {"name": "r", "exactly": {"deviceClassName": "gpu", "selectors": [{}]}},
            "spec.devices.requests[0].exactly.selectors[0].cel",
        ),
        (
            {"name": "r", "exactly": {"deviceClassName": "gpu", "capacity": {"requests": {"memory": "x"}}}},
            "spec.devices.requests[0].exactly.capacity.requests.memory",
        ),
        (
            {"name": "r", "exactly": {"deviceClassName": "gpu", "tolerations": [{"operator": "Equal"}]}},
            "spec.devices.requests[0].exactly.tolerations[0].operator",
        ),
        (
            {"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "gpu", "adminAccess": True}]},
            "spec.devices.requests[0].firstAvailable[0].adminAccess",
        ),
    ],
    ids=[
        "neither",
        "both",
        "no-class",
        "count-0",
        "bad-mode",
        "all-with-count",
        "empty-selector",
        "bad-capacity",
        "equal-without-key",
        "admin-in-sub-request",
    ],
)
def test_bad_claim_names_the_field(request_: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as e:
        make_claim(request_)
    assert e.value.field == field
    assert "resourceclaim default/c" in str(e.value)


def test_constraint_must_name_existing_requests_and_a_domain() -> None:
    with pytest.raises(ValidationError, match="no request named 'nope'"):
        make_claim(exactly(), constraints=[{"requests": ["nope"], "matchAttribute": "d/x"}])
    with pytest.raises(ValidationError, match="must include a domain"):
        make_claim(exactly(), constraints=[{"matchAttribute": "numa"}])


def test_non_object_input_is_a_validation_error_not_a_crash() -> None:
    for raw in ([], "x", {"spec": []}, {"spec": {"devices": {"requests": "x"}}}):
        with pytest.raises(ValidationError):
            ResourceClaim.from_dict(raw)
    with pytest.raises(ValidationError):
        ResourceSlice.from_dict({"spec": {"devices": [1]}})
    with pytest.raises(ValidationError):
        DeviceClass.from_dict({"spec": {"selectors": [{"cel": {"expression": 3}}]}})


def test_toleration_matching_is_kubes() -> None:
    taint = DeviceTaint("xid", "NoSchedule", "79")
    assert DeviceToleration(operator="Exists").tolerates(taint)
    assert DeviceToleration("xid", "Exists").tolerates(taint)
    assert DeviceToleration("xid", "Equal", "79").tolerates(taint)
    assert not DeviceToleration("xid", "Equal", "80").tolerates(taint)
    assert not DeviceToleration("xid", "Exists", effect="NoExecute").tolerates(taint)
    assert DeviceToleration("xid", "Exists", effect="NoSchedule").tolerates(taint)


def test_allocation_result_round_trips() -> None:
    raw = {
        "devices": {
            "results": [
                {
                    "request": "r",
                    "driver": "d",
                    "pool": "p",
                    "device": "g",
                    "adminAccess": True,
                    "shareID": "s",
                    "consumedCapacity": {"memory": "1Gi"},
                }
            ],
            "config": [{"source": "FromClass", "requests": ["r"], "opaque": {"driver": "d", "parameters": {"a": 1}}}],
        },
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
        },
    }
    result = AllocationResult.from_dict(raw)
    assert result.to_dict() == raw
    assert result.results[0].consumed_capacity["memory"].amount == Fraction(2**30)
