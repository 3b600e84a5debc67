"""Structural schemas: compiling, pruning, defaulting and validating as kube-apiserver does."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver.errors import StatusError
from apiserver.schema import fieldvalidation
from apiserver.schema.prune import apply_defaults, prune
from apiserver.schema.structural import SchemaError, Structural, compile_schema
from apiserver.schema.validate import validate

DEVICE_CRD = Path(__file__).resolve().parents[3] / "deploy" / "crds" / "scheduling.koordinator.sh_devices.yaml"


@pytest.fixture(scope="module")
def device_schema() -> Structural:
    crd = yaml.safe_load(DEVICE_CRD.read_text())
    return compile_schema(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def device(**fields: Any) -> dict[str, Any]:
    gpu = {"type": "gpu", "minor": 0, "health": True, **fields}
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device", "spec": {"devices": [gpu]}}


def messages(schema: Structural, obj: Any) -> list[str]:
    return [f"{c.field}: {c.message}" for c in validate(schema, obj)]


def test_a_valid_device_has_no_problems(device_schema: Structural) -> None:
    assert messages(device_schema, device(resources={"koordinator.sh/gpu-core": "100", "x": 5})) == []


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"minor": "three"},
            'spec.devices[0].minor: Invalid value: "string": '
            'spec.devices[0].minor in body must be of type integer: "string"',
        ),
        (
            {"conditions": [{"type": "Healthy", "status": "maybe"}]},
            'spec.devices[0].conditions[0].status: Unsupported value: "maybe": supported values: '
            '"True", "False", "Unknown"',
        ),
        (
            {"conditions": [{"type": "Healthy", "status": "True", "observedGeneration": -1}]},
            "spec.devices[0].conditions[0].observedGeneration: Invalid value: -1: "
            "spec.devices[0].conditions[0].observedGeneration in body should be greater than or equal to 0",
        ),
        (
            {"resources": {"gpu": "lots"}},
            'spec.devices[0].resources[gpu]: Invalid value: "lots": spec.devices[0].resources[gpu] in body should '
            "match '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+"
            "(\\.[0-9]*)?)|(\\.[0-9]+))))?$'",
        ),
        (
            {"resources": {"gpu": 1.5}},
            'spec.devices[0].resources[gpu]: Invalid value: "number": spec.devices[0].resources[gpu] in body must be '
            'of type integer,string: "number"',
        ),
        ({"topology": {"socketID": 0, "nodeID": 0}}, "spec.devices[0].topology.pcieID: Required value"),
        (
            {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "yesterday"}]},
            'spec.devices[0].conditions[0].lastTransitionTime: Invalid value: "yesterday": '
            'spec.devices[0].conditions[0].lastTransitionTime in body must be of type date-time: "yesterday"',
        ),
    ],
    ids=["type", "enum", "minimum", "pattern", "int-or-string", "required", "format"],
)
def test_each_rule_names_the_field_as_kube_does(device_schema: Structural, fields: Any, expected: str) -> None:
    assert messages(device_schema, device(**fields)) == [expected]


def test_every_problem_is_reported_at_once(device_schema: Structural) -> None:
    obj = device(minor="three")
    obj["spec"]["devices"].append({"minor": "x"})
    found = messages(device_schema, obj)
    assert len(found) == 3 and "spec.devices[1].health: Required value" in found


def test_pruning_drops_unknown_fields_and_keeps_preserved_ones(device_schema: Structural) -> None:
    obj = device(colour="red")
    obj["spec"]["typo"] = 1
    obj["status"] = {"allocations": [{"anything": {"goes": True}}], "extra": 1}
    obj["metadata"] = {"name": "n", "labels": {"a": "b"}}
    removed = prune(device_schema, obj)
    assert sorted(removed) == ["spec.devices[0].colour", "spec.typo", "status.extra"]
    assert "colour" not in obj["spec"]["devices"][0] and "typo" not in obj["spec"]
    assert obj["status"] == {"allocations": [{"anything": {"goes": True}}]}
    assert obj["metadata"] == {"name": "n", "labels": {"a": "b"}}


SCHEMA_WITH_DEFAULTS = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "default": {},
            "properties": {
                "replicas": {"type": "integer", "default": 1, "maximum": 5},
                "mode": {"type": "string", "default": "fast"},
                "note": {"type": "string"},
                "maybe": {"type": "string", "nullable": True},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "name": {"type": "string", "minLength": 2, "maxLength": 4},
            },
        }
    },
}


def test_defaults_fill_absent_and_non_nullable_null_fields() -> None:
    schema = compile_schema(SCHEMA_WITH_DEFAULTS)
    obj: dict[str, Any] = {"spec": {"mode": None, "note": None, "maybe": None}}
    apply_defaults(schema, obj)
    assert obj == {"spec": {"replicas": 1, "mode": "fast", "maybe": None}}
    empty: dict[str, Any] = {}
    apply_defaults(schema, empty)
    assert empty == {"spec": {"replicas": 1, "mode": "fast"}}


def test_lengths_bounds_and_sets() -> None:
    schema = compile_schema(SCHEMA_WITH_DEFAULTS)
    found = messages(schema, {"spec": {"replicas": 9, "tags": ["a", "a"], "name": "toolong"}})
    assert found == [
        "spec.replicas: Invalid value: 9: spec.replicas in body should be less than or equal to 5",
        'spec.tags[1]: Duplicate value: "a"',
        "spec.name: Too long: may not be longer than 4",
    ]
    assert messages(schema, {"spec": {"name": "x"}}) == [
        'spec.name: Invalid value: "x": spec.name in body should be at least 2 chars long'
    ]


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({"type": "object", "properties": {"a": {"description": "no type"}}}, "openAPIV3Schema.properties[a].type"),
        ({"type": "array"}, "openAPIV3Schema.items"),
        ({"type": "thing"}, "openAPIV3Schema.type"),
        ({"type": "string", "pattern": "("}, "openAPIV3Schema.pattern"),
        ({"type": "object", "anyOf": [{"type": "string"}]}, "openAPIV3Schema.anyOf[0]"),
    ],
    ids=["untyped-field", "array-without-items", "unknown-type", "bad-pattern", "type-in-anyOf"],
)
def test_non_structural_schemas_are_refused_with_the_place(raw: Any, where: str) -> None:
    with pytest.raises(SchemaError) as e:
        compile_schema(raw)
    assert e.value.path == where


def test_field_validation_modes() -> None:
    with fieldvalidation.scope("Warn") as state:
        fieldvalidation.report_unknown("Device", "v1alpha1", ["spec.typo"])
    assert state.warnings == ['unknown field "spec.typo"']
    with fieldvalidation.scope("Strict"), pytest.raises(StatusError) as e:
        fieldvalidation.report_unknown("Device", "v1alpha1", ["spec.typo"])
    assert e.value.code == 400 and 'strict decoding error: unknown field "spec.typo"' in e.value.message
    with fieldvalidation.scope("Ignore") as state:
        fieldvalidation.report_unknown("Device", "v1alpha1", ["spec.typo"])
    assert state.warnings == []
    with pytest.raises(StatusError) as e, fieldvalidation.scope("Loose"):
        pass
    assert e.value.code == 400
