"""Dynamic Resource Allocation's kinds as the embedded API server defaults and checks them
(kube-apiserver's rules and wording), pods' claims, and `kubectl get`'s columns."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.catalog import Catalog
from apiserver.dra import STRATEGIES
from apiserver.dra.classes import is_extended_resource_name
from apiserver.errors import Cause
from apiserver.pods import PodStrategy
from apiserver.tables import table

CLAIMS = STRATEGIES["resourceclaims.resource.k8s.io"]
TEMPLATES = STRATEGIES["resourceclaimtemplates.resource.k8s.io"]
CLASSES = STRATEGIES["deviceclasses.resource.k8s.io"]
SLICES = STRATEGIES["resourceslices.resource.k8s.io"]
GPU = {"name": "gpu", "exactly": {"deviceClassName": "gpu.tessera.dev"}}
ALLOCATION = {"devices": {"results": [{"request": "gpu", "driver": "gpu.tessera.dev", "pool": "n1", "device": "g0"}]}}


def messages(causes: list[Cause]) -> list[str]:
    return [f"{c.field}: {c.message}" for c in causes]


def claim(*requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {"devices": {"requests": [copy.deepcopy(r) for r in requests or (GPU,)], **devices}},
    }


def created(obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    CLAIMS.prepare_create(obj)
    return obj, messages(CLAIMS.validate(obj, None))


# --- defaults ------------------------------------------------------------------------------------


def test_a_request_defaults_to_one_device_exactly_and_tolerations_to_equal() -> None:
    sub = {"name": "big", "deviceClassName": "gpu.tessera.dev", "tolerations": [{"key": "k", "value": "v"}]}
    obj, problems = created(claim(GPU, {"name": "any", "firstAvailable": [sub]}))
    assert problems == []
    exactly = obj["spec"]["devices"]["requests"][0]["exactly"]
    assert (exactly["allocationMode"], exactly["count"]) == ("ExactCount", 1)
    first = obj["spec"]["devices"]["requests"][1]["firstAvailable"][0]
    assert (first["allocationMode"], first["count"], first["tolerations"][0]["operator"]) == ("ExactCount", 1, "Equal")
    assert obj["status"] == {}, "a new claim's status is the scheduler's"


def test_allocation_mode_all_gets_no_count() -> None:
    all_of = {"name": "all", "exactly": {"deviceClassName": "gpu.tessera.dev", "allocationMode": "All"}}
    obj, problems = created(claim(all_of))
    assert problems == [] and "count" not in obj["spec"]["devices"]["requests"][0]["exactly"]
    with_count = {"name": "all", "exactly": {"deviceClassName": "x", "allocationMode": "All", "count": 2}}
    assert created(claim(with_count))[1] == [
        "spec.devices.requests[0].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'"
    ]


def test_a_templates_claim_spec_is_defaulted_and_its_claims_metadata_checked() -> None:
    template = {
        "metadata": {"name": "t", "namespace": "ml"},
        "spec": {"metadata": {"labels": {"bad key!": "x"}}, "spec": claim()["spec"]},
    }
    TEMPLATES.prepare_create(template)
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    (problem,) = messages(TEMPLATES.validate(template, None))
    assert problem.startswith("spec.metadata.labels: Invalid value: 'bad key!'")


def test_a_device_taint_gets_the_time_it_was_added() -> None:
    slice_ = resource_slice({"name": "g0", "taints": [{"key": "gpu.tessera.dev/xid", "effect": "NoSchedule"}]})
    SLICES.prepare_create(slice_)
    assert slice_["spec"]["devices"][0]["taints"][0]["timeAdded"].endswith("Z")
    assert messages(SLICES.validate(slice_, None)) == []


# --- a claim's spec --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("devices", "problem"),
    [
        (
            {"requests": [GPU, GPU]},
            'spec.devices.requests[1].name: Duplicate value: "gpu"',
        ),
        (
            {"requests": [{"name": "gpu"}]},
            "spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required",
        ),
        (
            {"requests": [{**GPU, "firstAvailable": [{"name": "a", "deviceClassName": "x"}]}]},
            "spec.devices.requests[0]: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, "
            "but multiple fields are set",
        ),
        (
            {"requests": [{"name": "gpu", "exactly": {}}]},
            "spec.devices.requests[0].exactly.deviceClassName: Required value",
        ),
        (
            {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "x", "allocationMode": "Some"}}]},
            'spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Some": supported values: "All", '
            '"ExactCount"',
        ),
        (
            {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "x", "selectors": [{"cel": {}}]}}]},
            "spec.devices.requests[0].exactly.selectors[0].cel.expression: Required value: "
            "expression must not be empty",
        ),
        (
            {"requests": [GPU], "constraints": [{"requests": ["nic"], "matchAttribute": "gpu.tessera.dev/pcieRoot"}]},
            'spec.devices.constraints[0].requests[0]: Invalid value: "nic": must be the name of a request in the '
            "claim or the name of a request and a subrequest separated by '/'",
        ),
        (
            {"requests": [GPU], "constraints": [{"matchAttribute": "pcieRoot"}]},
            'spec.devices.constraints[0].matchAttribute: Invalid value: "pcieRoot": must include a domain',
        ),
        (
            {"requests": [GPU], "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.tessera.dev"}}]},
            "spec.devices.config[0].opaque.parameters: Required value",
        ),
        (
            {"requests": [{"name": "Not_A_Label", "exactly": {"deviceClassName": "x"}}]},
            'spec.devices.requests[0].name: Invalid value: "Not_A_Label": a lowercase RFC 1123 label must consist '
            "of lower case alphanumeric characters or '-'",
        ),
        (
            {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "x",
                            "selectors": [{"cel": {"expression": "devic.driver == 1"}}],
                        },
                    }
                ]
            },
            'spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: "devic.driver == 1": '
            "compilation failed: 1:6: undeclared reference to 'devic.driver' (in container '')",
        ),
    ],
    ids=[
        "duplicate-request",
        "no-exactly-nor-first-available",
        "both",
        "no-class",
        "bad-mode",
        "empty-cel",
        "constraint-names-no-request",
        "attribute-without-domain",
        "config-without-parameters",
        "request-name",
        "cel-does-not-compile",
    ],
)
def test_a_bad_claim_spec_is_kubes_error(devices: dict[str, Any], problem: str) -> None:
    obj = {"metadata": {"name": "c", "namespace": "ml"}, "spec": {"devices": copy.deepcopy(devices)}}
    assert problem in created(obj)[1]


def test_a_constraint_may_name_a_subrequest_and_a_config_its_request() -> None:
    first = {"name": "any", "firstAvailable": [{"name": "big", "deviceClassName": "x"}]}
    constraints = [{"requests": ["gpu", "any/big"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    config = [{"requests": ["gpu"], "opaque": {"driver": "gpu.tessera.dev", "parameters": {"sharing": "mps"}}}]
    assert created(claim(GPU, first, constraints=constraints, config=config))[1] == []


def test_the_spec_is_immutable_and_the_status_separate() -> None:
    old, _ = created(claim())
    new = copy.deepcopy(old)
    new["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    assert messages(CLAIMS.validate(new, old)) == ['spec: Invalid value: "object": field is immutable']
    labelled = copy.deepcopy(old)
    labelled["metadata"]["labels"] = {"team": "ml"}
    assert CLAIMS.validate(labelled, old) == []


# --- a claim's status ------------------------------------------------------------------------------


def status_write(old_status: dict[str, Any], new_status: dict[str, Any], **meta: Any) -> list[str]:
    old, _ = created(claim())
    old["status"] = old_status
    new = copy.deepcopy(old)
    new["metadata"].update(meta)
    new["status"] = new_status
    CLAIMS.prepare_status(new, old)
    return messages(CLAIMS.validate(new, old))


POD = {"resource": "pods", "name": "p", "uid": "u1"}


def test_an_allocation_and_its_consumer_are_accepted() -> None:
    assert status_write({}, {"allocation": ALLOCATION, "reservedFor": [POD]}) == []


def test_consumers_need_an_allocation_and_unique_uids() -> None:
    assert status_write({}, {"reservedFor": [POD]}) == [
        "status.reservedFor: Forbidden: may not be specified when `allocated` is not set"
    ]
    assert status_write({}, {"allocation": ALLOCATION, "reservedFor": [POD, POD]}) == [
        'status.reservedFor[1].uid: Duplicate value: "u1"'
    ]


def test_an_allocation_can_be_removed_but_never_changed() -> None:
    other = {"devices": {"results": [{**ALLOCATION["devices"]["results"][0], "device": "g1"}]}}
    assert status_write({"allocation": ALLOCATION}, {"allocation": other}) == [
        'status.allocation: Invalid value: "object": field is immutable'
    ]
    assert status_write({"allocation": ALLOCATION, "reservedFor": [POD]}, {}) == []


def test_results_name_the_claims_requests_and_valid_devices() -> None:
    result = {"request": "nic", "driver": "Not A Driver", "pool": "n1", "device": "g0"}
    problems = status_write({}, {"allocation": {"devices": {"results": [result]}}})
    assert problems[0].startswith('status.allocation.devices.results[0].request: Invalid value: "nic"')
    assert problems[1].startswith('status.allocation.devices.results[0].driver: Invalid value: "Not A Driver"')


def test_a_claim_being_deleted_takes_no_new_consumer() -> None:
    second = {"resource": "pods", "name": "q", "uid": "u2"}
    problems = status_write(
        {"allocation": ALLOCATION, "reservedFor": [POD]},
        {"allocation": ALLOCATION, "reservedFor": [POD, second]},
        deletionTimestamp="2024-01-01T00:00:00Z",
    )
    assert problems == [
        "status.reservedFor: Forbidden: new entries may not be added while `deallocationRequested` or "
        "`deletionTimestamp` are set"
    ]


def test_deallocating_drops_the_drivers_device_reports() -> None:
    report = {"driver": "gpu.tessera.dev", "pool": "n1", "device": "g0", "conditions": []}
    old, _ = created(claim())
    old["status"] = {"allocation": ALLOCATION, "devices": [report]}
    assert messages(CLAIMS.validate(old, {**old, "status": {"allocation": ALLOCATION}})) == []
    new = copy.deepcopy(old)
    new["status"] = {"devices": [report]}
    CLAIMS.prepare_status(new, old)
    assert new["status"] == {}


# --- classes and slices ----------------------------------------------------------------------------


def test_a_device_class_needs_expressions_and_a_real_extended_resource() -> None:
    good = {"metadata": {"name": "gpu.tessera.dev"}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
    assert CLASSES.validate(good, None) == []
    bad = {"metadata": {"name": "c"}, "spec": {"selectors": [{}], "extendedResourceName": "gpu"}}
    assert messages(CLASSES.validate(bad, None)) == [
        "spec.selectors[0].cel: Required value",
        'spec.extendedResourceName: Invalid value: "gpu": must be a valid extended resource name',
    ]
    assert is_extended_resource_name("nvidia.com/gpu")
    assert not is_extended_resource_name("kubernetes.io/gpu") and not is_extended_resource_name("cpu")


def resource_slice(*devices: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1-gpu"},
        "spec": {
            "driver": "gpu.tessera.dev",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "n1",
            "devices": [copy.deepcopy(d) for d in devices],
            **spec,
        },
    }


def test_a_slice_of_typed_attributes_and_capacity_is_accepted() -> None:
    gpu = {
        "name": "g0",
        "attributes": {"uuid": {"string": "GPU-1"}, "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}},
        "capacity": {"memory": {"value": "80Gi"}},
    }
    assert SLICES.validate(resource_slice(gpu), None) == []


def test_a_bad_slice_is_kubes_error() -> None:
    bad = resource_slice(
        {"name": "g0", "attributes": {"uuid": {"string": "x", "int": 1}}},
        {"name": "g0", "attributes": {"driverVersion": {"version": "550"}}},
        allNodes=True,
    )
    assert messages(SLICES.validate(bad, None)) == [
        'spec: Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, `nodeSelector`, `allNodes`, '
        "`perDeviceNodeSelection` is required, but multiple fields are set",
        'spec.devices[1].name: Duplicate value: "g0"',
        'spec.devices[0].attributes[uuid]: Invalid value: "": exactly one value must be specified',
        'spec.devices[1].attributes[driverVersion].version: Invalid value: "550": must be a string compatible with '
        "semver.org spec 2.0.0",
    ]


def test_a_slices_driver_pool_and_node_are_immutable() -> None:
    old = resource_slice({"name": "g0"})
    moved = resource_slice({"name": "g0"})
    moved["spec"]["nodeName"] = "n2"
    assert messages(SLICES.validate(moved, old)) == ['spec.nodeName: Invalid value: "n2": field is immutable']


# --- pods ------------------------------------------------------------------------------------------


def pod(claims: list[Any], container_claims: list[Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {
            "resourceClaims": claims,
            "containers": [{"name": "main", "image": "x", "resources": {"claims": container_claims}}],
        },
        "status": {},
    }


def test_a_pods_claims_are_kept_when_valid() -> None:
    obj = pod([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], [{"name": "gpu"}])
    assert PodStrategy().validate(obj, None) == []


def test_a_pods_claims_are_checked_as_kube_checks_them() -> None:
    obj = pod(
        [
            {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
            {"name": "gpu", "resourceClaimName": "shared"},
            {"name": "nic"},
        ],
        [{"name": "rdma"}, {"name": "gpu"}, {"name": "gpu"}],
    )
    assert messages(PodStrategy().validate(obj, None)) == [
        'spec.resourceClaims[1].name: Duplicate value: "gpu"',
        'spec.resourceClaims[2]: Invalid value: "object": must specify one of: `resourceClaimName`, '
        "`resourceClaimTemplateName`",
        'spec.containers[0].resources.claims[0]: Not found: "rdma": must be one of the names in '
        "pod.spec.resourceClaims: gpu, nic",
        'spec.containers[0].resources.claims[2]: Duplicate value: "gpu"',
    ]


def test_a_pods_claim_statuses_name_its_claims() -> None:
    old = pod([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], [])
    new = copy.deepcopy(old)
    new["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x2k4z"}]}
    assert PodStrategy().validate(new, old) == []
    new["status"]["resourceClaimStatuses"].append({"name": "nic", "resourceClaimName": "p-nic-b5c7d"})
    assert messages(PodStrategy().validate(new, old)) == [
        'status.resourceClaimStatuses[1].name: Invalid value: "nic": must match the name of an entry in '
        "`spec.resourceClaims`"
    ]


# --- kubectl get -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "meta", "state"),
    [
        ({}, {}, "pending"),
        ({"allocation": ALLOCATION}, {}, "allocated"),
        ({"allocation": ALLOCATION, "reservedFor": [POD]}, {}, "allocated,reserved"),
        ({"allocation": ALLOCATION}, {"deletionTimestamp": "2024-01-01T00:00:00Z"}, "deleted,allocated,deallocating"),
        ({}, {"deletionTimestamp": "2024-01-01T00:00:00Z"}, "deleted"),
    ],
)
def test_claims_print_kubes_state_column(status: dict[str, Any], meta: dict[str, Any], state: str) -> None:
    rt = Catalog().lookup("resource.k8s.io", "v1", "resourceclaims")
    assert rt is not None
    obj = {"metadata": {"name": "c", "creationTimestamp": "2024-01-01T00:00:00Z", **meta}, "status": status}
    out = table(rt, [obj], rv="1", query={})
    assert [c["name"] for c in out["columnDefinitions"]] == ["Name", "State", "Age"]
    assert out["rows"][0]["cells"][:2] == ["c", state]


def test_slices_print_node_driver_and_pool() -> None:
    rt = Catalog().lookup("resource.k8s.io", "v1", "resourceslices")
    assert rt is not None
    out = table(rt, [resource_slice()], rv="1", query={})
    assert [c["name"] for c in out["columnDefinitions"]] == ["Name", "Node", "Driver", "Pool", "Age"]
    assert out["rows"][0]["cells"][:4] == ["n1-gpu", "n1", "gpu.tessera.dev", "n1"]
