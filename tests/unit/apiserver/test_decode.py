"""Built-in kinds decoded as kube-apiserver decodes them into Go types: the pruning walk checks
every known field's JSON type (`prune.decode`, `gotypes`), and the registry refuses a wrong one
with kube's 400 on every write path, storing nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apiserver.apply.server import server_side_apply
from apiserver.errors import StatusError
from apiserver.registry import JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, Registry
from apiserver.schema import builtin, fieldvalidation
from apiserver.schema.gotypes import DecodeError
from apiserver.schema.prune import decode, prune
from apiserver.schema.structural import Structural, compile_schema
from tests.unit.apiserver.objects import make_pod, rt

_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def schema(group: str, kind: str) -> Structural:
    found = builtin.load().structural(group, "v1", kind)
    assert found is not None
    return found


def deployment(**spec: Any) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    selector = {"matchLabels": {"app": "a"}}
    return {"metadata": {"name": "d"}, "spec": {"selector": selector, "template": template, **spec}}


def container(**fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i", **fields}]}}


def refused(group: str, kind: str, body: dict[str, Any]) -> str:
    with pytest.raises(DecodeError) as e:
        decode(schema(group, kind), body)
    return str(e.value)


# --- the walker: each mismatch, named as Go's decoder names it -------------------------------------


@pytest.mark.parametrize(
    ("body", "got", "field", "go_type"),
    [
        (deployment(replicas="3"), "string", "DeploymentSpec.spec.replicas", "int32"),
        (deployment(replicas=True), "bool", "DeploymentSpec.spec.replicas", "int32"),
        (deployment(paused="yes"), "string", "DeploymentSpec.spec.paused", "bool"),
        (deployment(paused=1), "number", "DeploymentSpec.spec.paused", "bool"),
        (deployment(template=[]), "array", "DeploymentSpec.spec.template", "v1.PodTemplateSpec"),
        (deployment(template="x"), "string", "DeploymentSpec.spec.template", "v1.PodTemplateSpec"),
        ({"metadata": {"name": 7}}, "number", "ObjectMeta.metadata.name", "string"),
        ({"metadata": {"name": {"a": 1}}}, "object", "ObjectMeta.metadata.name", "string"),
        ({"spec": []}, "array", "Deployment.spec", "v1.DeploymentSpec"),
    ],
    ids=[
        "string-for-int32",
        "bool-for-int32",
        "string-for-bool",
        "number-for-bool",
        "array-for-struct",
        "string-for-struct",
        "number-for-string",
        "object-for-string",
        "array-for-root-field",
    ],
)
def test_each_type_mismatch_is_named_with_struct_field_and_go_type(
    body: dict[str, Any], got: str, field: str, go_type: str
) -> None:
    expected = f"json: cannot unmarshal {got} into Go struct field {field} of type {go_type}"
    assert refused("apps", "Deployment", body) == expected


def test_nested_arrays_of_objects_name_the_field_without_indices() -> None:
    body = deployment()
    ports = [{"containerPort": 80}, {"containerPort": "80"}]
    body["spec"]["template"]["spec"]["containers"].append({"name": "b", "image": "i", "ports": ports})
    assert refused("apps", "Deployment", body) == (
        "json: cannot unmarshal string into Go struct field "
        "ContainerPort.spec.template.spec.containers.ports.containerPort of type int32"
    )
    env = container(env=[{"name": "A", "value": 1}])
    assert refused("", "Pod", env).endswith("Go struct field EnvVar.spec.containers.env.value of type string")


def test_a_list_or_a_map_of_the_wrong_shape_names_the_slice_or_map_type() -> None:
    assert refused("", "Pod", {"spec": {"containers": {}}}) == (
        "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container"
    )
    assert refused("", "Pod", {"spec": {"containers": ["nginx"]}}) == (
        "json: cannot unmarshal string into Go struct field PodSpec.spec.containers of type v1.Container"
    )
    assert refused("", "Pod", container(args="--x")).endswith("Container.spec.containers.args of type []string")
    assert refused("", "Pod", {"metadata": {"labels": ["a"]}}).endswith(
        "ObjectMeta.metadata.labels of type map[string]string"
    )


@pytest.mark.parametrize(
    "labels",
    [{"a": 1}, {"a": True}, {"a": ["x"]}, {"a": "ok", "b": {"c": "d"}}],
    ids=["number", "bool", "array", "object"],
)
def test_a_map_value_of_the_wrong_type_is_named_by_the_map_field(labels: dict[str, Any]) -> None:
    message = refused("apps", "Deployment", {"metadata": {"name": "d", "labels": labels}})
    assert message.startswith("json: cannot unmarshal ")
    assert message.endswith(" into Go struct field ObjectMeta.metadata.labels of type string")


@pytest.mark.parametrize("value", [3.0, 3.5, 1e3], ids=["3.0", "3.5", "1e3"])
def test_an_integer_field_takes_no_number_with_a_fraction_or_exponent(value: float) -> None:
    message = refused("apps", "Deployment", deployment(replicas=value))
    field = "DeploymentSpec.spec.replicas"
    assert message == f"json: cannot unmarshal number {value!r} into Go struct field {field} of type int32"


def test_integers_are_held_to_their_go_types_range() -> None:
    assert "number 2147483648 into" in refused("apps", "Deployment", deployment(replicas=2**31))
    assert decode(schema("apps", "Deployment"), deployment(replicas=2**31 - 1)) == []
    grace = container()
    grace["spec"]["terminationGracePeriodSeconds"] = 2**40  # an int64
    assert decode(schema("", "Pod"), grace) == []
    grace["spec"]["terminationGracePeriodSeconds"] = 2**63
    assert refused("", "Pod", grace).endswith("PodSpec.spec.terminationGracePeriodSeconds of type int64")


@pytest.mark.parametrize("target", ["http", 8080, 0], ids=["name", "number", "zero"])
def test_int_or_string_takes_a_string_or_an_int32(target: Any) -> None:
    body = {"spec": {"ports": [{"port": 80, "targetPort": target}]}}
    assert decode(schema("", "Service"), body) == []
    surge = deployment(strategy={"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}})
    assert decode(schema("apps", "Deployment"), surge) == []


@pytest.mark.parametrize(
    ("target", "got"),
    [(True, "bool"), (3.5, "number 3.5"), (2**31, "number 2147483648"), ({}, "object"), ([], "array")],
)
def test_int_or_string_refuses_anything_else(target: Any, got: str) -> None:
    body = {"spec": {"ports": [{"port": 80, "targetPort": target}]}}
    assert refused("", "Service", body) == (
        f"json: cannot unmarshal {got} into Go struct field ServicePort.spec.ports.targetPort of type int32"
    )


@pytest.mark.parametrize("cpu", ["500m", "1", 1, 0.5, "1e3", "-1"], ids=str)
def test_a_quantity_may_be_a_string_or_a_json_number(cpu: Any) -> None:
    body = container(resources={"limits": {"cpu": cpu, "memory": "1Gi"}, "requests": {"cpu": cpu}})
    assert decode(schema("", "Pod"), body) == []
    assert body["spec"]["containers"][0]["resources"]["limits"]["cpu"] == cpu, "stored as sent"


@pytest.mark.parametrize(
    ("cpu", "reason"),
    [
        ("1x", _FORMAT),
        ("one", _FORMAT),
        ("", _FORMAT),
        (True, _FORMAT),
        ({"n": 1}, _FORMAT),
        ("1Mm", "unable to parse quantity's suffix"),
    ],
    ids=["bad-suffix-char", "word", "empty", "bool", "object", "unknown-suffix"],
)
def test_a_bad_quantity_is_kubes_parse_error_with_the_field(cpu: Any, reason: str) -> None:
    message = refused("", "Pod", container(resources={"limits": {"cpu": cpu}}))
    assert message.startswith(reason + " (Go struct field ResourceRequirements.spec.containers.resources.limits")
    assert "of type resource.Quantity" in message


def test_node_status_quantities_are_checked_too() -> None:
    assert decode(schema("", "Node"), {"status": {"capacity": {"cpu": 8, "memory": "64Gi"}}}) == []
    assert "NodeStatus.status.allocatable" in refused("", "Node", {"status": {"allocatable": {"cpu": "eight"}}})


def test_nulls_are_absent_fields_and_zero_map_values_or_items() -> None:
    body = deployment(replicas=None, paused=None)
    body["metadata"]["labels"] = {"a": None, "b": "x"}
    body["spec"]["template"]["spec"]["containers"][0]["args"] = ["x", None]
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": None}}
    assert decode(schema("apps", "Deployment"), body) == []
    assert "replicas" not in body["spec"] and "paused" not in body["spec"]
    assert body["metadata"]["labels"] == {"a": "", "b": "x"}
    first = body["spec"]["template"]["spec"]["containers"][0]
    assert first["args"] == ["x", ""] and first["resources"]["limits"] == {"cpu": "0"}


def test_unknown_fields_are_pruned_unchecked_and_untyped_fields_take_anything() -> None:
    body = deployment(replicaz="three")
    assert decode(schema("apps", "Deployment"), body) == ["spec.replicaz"]
    assert "replicaz" not in body["spec"]
    props = {"x": {"type": "object", "example": {"any": [1, True, None]}, "default": 7}}
    version = {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": props}}}
    crd = {"metadata": {"name": "a.b"}, "spec": {"versions": [version]}}  # JSON values are untyped
    assert decode(schema("apiextensions.k8s.io", "CustomResourceDefinition"), crd) == []


def test_the_first_mismatch_is_reported_unless_a_custom_decoder_fails_later() -> None:
    two = deployment(replicas="3", paused="yes")
    assert "spec.replicas" in refused("apps", "Deployment", two)
    body = container(ports=[{"containerPort": "80"}], resources={"limits": {"cpu": "lots"}})
    assert refused("", "Pod", body).startswith(_FORMAT), "Go stops at a Quantity's error, after saving a mismatch"


def test_a_crd_schema_is_only_pruned_its_types_are_validations_business() -> None:
    crd_schema = compile_schema({"type": "object", "properties": {"size": {"type": "integer"}}})
    body = {"size": "3", "typo": 1}
    assert prune(crd_schema, body) == ["typo"] and body == {"size": "3"}


# --- through the registry: every write path, before anything is stored ----------------------------


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def pods(registry: Registry) -> Registry:
    run(registry.ensure_namespaces())
    run(registry.create(rt(registry, "pods"), "default", make_pod("p")))
    return registry


def bad_request(call: Any) -> str:
    with pytest.raises(StatusError) as e:
        run(call)
    assert (e.value.code, e.value.reason) == (400, "BadRequest")
    return e.value.message


PORT = 'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field '


def test_create_is_refused_and_nothing_is_stored(pods: Registry) -> None:
    kind = rt(pods, "pods")
    body = make_pod("q", containers=[{"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}])
    assert bad_request(pods.create(kind, "default", body)) == (
        PORT + "ContainerPort.spec.containers.ports.containerPort of type int32"
    )
    with pytest.raises(StatusError) as e:
        pods.get(kind, "default", "q")
    assert e.value.code == 404


@pytest.mark.parametrize(
    ("patch_type", "patch"),
    [
        (MERGE_PATCH, {"metadata": {"labels": {"a": 1}}}),
        (STRATEGIC_MERGE_PATCH, {"metadata": {"labels": {"a": 1}}}),
        (JSON_PATCH, [{"op": "add", "path": "/metadata/labels", "value": {"a": 1}}]),
    ],
    ids=["merge", "strategic", "json"],
)
def test_a_patch_is_checked_once_applied(pods: Registry, patch_type: str, patch: Any) -> None:
    kind = rt(pods, "pods")
    before = pods.get(kind, "default", "p")
    message = bad_request(pods.patch(kind, "default", "p", patch_type, patch))
    assert message.endswith("Go struct field ObjectMeta.metadata.labels of type string")
    assert pods.get(kind, "default", "p").rv == before.rv


def test_update_and_status_are_checked(pods: Registry) -> None:
    kind = rt(pods, "pods")
    current = pods.get(kind, "default", "p").fresh()
    current["spec"]["activeDeadlineSeconds"] = "60"
    assert "PodSpec.spec.activeDeadlineSeconds of type int64" in bad_request(pods.update(kind, "default", "p", current))
    status = pods.get(kind, "default", "p").fresh()
    status["status"] = {"phase": "Running", "containerStatuses": [{"name": "c", "ready": "yes"}]}
    message = bad_request(pods.update(kind, "default", "p", status, subresource="status"))
    assert "ContainerStatus.status.containerStatuses.ready of type bool" in message


def test_server_side_apply_is_checked(pods: Registry) -> None:
    kind = rt(pods, "pods")
    applied = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"priority": "high"}}
    message = bad_request(server_side_apply(pods, kind, "default", "p", applied, manager="m", force=True))
    assert message.endswith("PodSpec.spec.priority of type int32")
    created = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "new"}, "spec": {"containers": {}}}
    bad_request(server_side_apply(pods, kind, "default", "new", created, manager="m", force=False))
    with pytest.raises(StatusError):
        pods.get(kind, "default", "new")


@pytest.mark.parametrize("mode", ["Ignore", "Warn", "Strict"])
def test_whatever_the_field_validation(pods: Registry, mode: str) -> None:
    body = make_pod("q")
    body["spec"]["priority"] = "high"
    with fieldvalidation.scope(mode):
        bad_request(pods.create(rt(pods, "pods"), "default", body))


def test_timestamps_are_parsed_as_kube_parses_time_and_micro_time() -> None:
    stamp = "2024-01-02T03:04:05Z"
    lease = {"metadata": {"name": "l"}, "spec": {"renewTime": "2024-01-02T03:04:05.123456Z"}}
    assert decode(schema("coordination.k8s.io", "Lease"), lease) == []
    lease["spec"]["renewTime"] = stamp
    with pytest.raises(DecodeError) as e:
        decode(schema("coordination.k8s.io", "Lease"), lease)
    assert str(e.value) == (
        f'parsing time "{stamp}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000" '
        "(Go struct field LeaseSpec.spec.renewTime of type v1.MicroTime)"
    )
    condition = {"type": "Ready", "status": "True", "lastTransitionTime": "now"}
    message = refused("", "Pod", {"metadata": {"name": "p"}, "status": {"conditions": [condition]}})
    assert message == (
        'parsing time "now" as "2006-01-02T15:04:05Z07:00": cannot parse "now" as "2006" '
        "(Go struct field PodCondition.status.conditions.lastTransitionTime of type v1.Time)"
    )
    assert refused("", "Pod", {"metadata": {"creationTimestamp": 5}}) == (
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.creationTimestamp of type string"
    )
    assert decode(schema("", "Pod"), {"metadata": {"creationTimestamp": None, "deletionTimestamp": stamp}}) == []


def test_bytes_are_base64_as_go_decodes_them() -> None:
    secret = {"metadata": {"name": "s"}, "data": {"a": "YWJj", "b": "YQ==\n", "c": ""}}
    assert decode(schema("", "Secret"), secret) == []
    field = "(Go struct field Secret.data of type []uint8)"
    assert refused("", "Secret", {"data": {"a": "plain"}}) == f"illegal base64 data at input byte 4 {field}"
    assert refused("", "Secret", {"data": {"a": "YQ="}}) == f"illegal base64 data at input byte 3 {field}"
    assert refused("", "Secret", {"data": {"a": 1}}) == (
        "json: cannot unmarshal number into Go struct field Secret.data of type []uint8"
    )
    webhook = {"webhooks": [{"name": "w.example.com", "clientConfig": {"caBundle": "not base64!"}}]}
    message = refused("admissionregistration.k8s.io", "ValidatingWebhookConfiguration", webhook)
    assert message == (
        "illegal base64 data at input byte 3 "
        "(Go struct field WebhookClientConfig.webhooks.clientConfig.caBundle of type []uint8)"
    )
