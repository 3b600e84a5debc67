"""A real `tessera apiserver` refuses the pod resources kube-apiserver refuses, as it refuses them.

Each rule over HTTP: status 422, reason Invalid, kube's field path and message in
`details.causes`; on create, on update and on patch. Pods kube accepts are still accepted.
"""

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from apis.extension import names
from cli.launchers.apiserver import EmbeddedAPIServer
from kube import errors
from kube.client import Client
from kube.resources import PODS, STRATEGIC_MERGE_PATCH

pytestmark = pytest.mark.integration

RES = "spec.containers[0].resources"
CORE_NOT_INTEGER = (
    'Invalid value: "12500m": must be an integer '
    "(koordinator.sh/gpu-core is a whole percent of one device: 100 = a whole device)"
)
NO_LIMIT = "Required value: Limit must be set for non overcommitable resources"


def pod(name: str, limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None) -> dict[str, Any]:
    resources = {k: v for k, v in (("limits", limits), ("requests", requests)) if v is not None}
    container = {"name": "main", "image": "busybox:1.36", "resources": resources}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [container]}}


def refused(client: Client, namespace: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """The (field, message) causes of the 422 a create gets."""
    with pytest.raises(errors.Invalid) as e:
        client.resource(PODS).create(body, namespace=namespace)
    assert (e.value.status, e.value.reason) == (422, "Invalid")
    assert (e.value.details["kind"], e.value.details["name"]) == ("Pod", body["metadata"]["name"])
    return [(c["field"], c["message"]) for c in e.value.causes]


@pytest.mark.parametrize(
    ("limits", "requests", "expected"),
    [
        (
            {names.NVIDIA_GPU: 0.5},
            None,
            [
                (f"{RES}.limits[nvidia.com/gpu]", 'Invalid value: "500m": must be an integer'),
                (f"{RES}.requests[nvidia.com/gpu]", 'Invalid value: "500m": must be an integer'),
            ],
        ),
        (
            {names.GPU_CORE: "12.5"},
            {names.GPU_CORE: "12.5"},
            [
                (f"{RES}.limits[koordinator.sh/gpu-core]", CORE_NOT_INTEGER),
                (f"{RES}.requests[koordinator.sh/gpu-core]", CORE_NOT_INTEGER),
            ],
        ),
        (
            {names.NVIDIA_GPU: "2"},
            {names.NVIDIA_GPU: "1"},
            [(f"{RES}.requests", 'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2')],
        ),
        (None, {names.GPU_MEMORY: "10Gi"}, [(f"{RES}.limits", NO_LIMIT)]),
        (
            {names.CPU: "-1"},
            None,
            [
                (f"{RES}.limits[cpu]", 'Invalid value: "-1": must be greater than or equal to 0'),
                (f"{RES}.requests[cpu]", 'Invalid value: "-1": must be greater than or equal to 0'),
            ],
        ),
        (
            {names.CPU: "1"},
            {names.CPU: "2"},
            [(f"{RES}.requests", 'Invalid value: "2": must be less than or equal to cpu limit of 1')],
        ),
    ],
    ids=[
        "fractional-gpu",
        "fractional-gpu-core",
        "request-below-limit",
        "request-without-limit",
        "negative",
        "cpu-over-limit",
    ],
)
def test_each_rule_is_refused_with_kubes_message(
    client: Client, namespace: str, limits: Any, requests: Any, expected: list[tuple[str, str]]
) -> None:
    assert refused(client, namespace, pod("bad", limits, requests)) == expected
    assert client.resource(PODS).list(namespace=namespace).items == []


@pytest.mark.parametrize(
    ("limits", "requests"),
    [
        ({names.NVIDIA_GPU: 1}, None),
        ({names.NVIDIA_GPU: "2"}, {names.NVIDIA_GPU: "2"}),
        ({names.GPU_MEMORY: "10Gi"}, None),
        ({names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}, {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}),
        ({names.CPU: "2", names.MEMORY: "2Gi"}, {names.CPU: "250m", names.MEMORY: "1Gi"}),
        ({"kubernetes.io/gpu-core": "12.5"}, None),
    ],
    ids=["whole-gpu", "requests-equal-limits", "gpu-memory", "gpu-share", "cpu-overcommit", "native-domain"],
)
def test_what_kube_accepts_is_stored(client: Client, namespace: str, limits: Any, requests: Any) -> None:
    created = client.resource(PODS).create(pod("good", limits, requests), namespace=namespace)
    stored = created["spec"]["containers"][0]["resources"]
    assert stored["requests"] == {**(limits or {}), **(requests or {})}, "requests default to limits"


def test_the_status_body_is_kubes(apiserver: EmbeddedAPIServer) -> None:
    parts = urlsplit(apiserver.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        body = json.dumps(pod("half", {names.NVIDIA_GPU: "500m"}))
        conn.request("POST", "/api/v1/namespaces/default/pods", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        status = json.loads(response.read())
    finally:
        conn.close()
    integer = 'Invalid value: "500m": must be an integer'
    assert response.status == 422
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'Pod "half" is invalid: [{RES}.limits[nvidia.com/gpu]: {integer}, '
        f"{RES}.requests[nvidia.com/gpu]: {integer}]",
        "reason": "Invalid",
        "details": {
            "name": "half",
            "kind": "Pod",
            "causes": [
                {"reason": "FieldValueInvalid", "message": integer, "field": f"{RES}.{side}[nvidia.com/gpu]"}
                for side in ("limits", "requests")
            ],
        },
        "code": 422,
    }


def test_an_update_follows_kubes_rules(client: Client, namespace: str) -> None:
    pods = client.resource(PODS)
    created = pods.create(pod("p", {names.NVIDIA_GPU: "1"}), namespace=namespace)
    half = json.loads(json.dumps(created))
    half["spec"]["containers"][0]["resources"] = {"limits": {names.NVIDIA_GPU: "0.5"}}
    with pytest.raises(errors.Invalid) as e:
        pods.update(half, namespace=namespace)
    fields = [(c["field"], c["message"].split(":")[0]) for c in e.value.causes]
    assert fields == [
        (f"{RES}.limits[nvidia.com/gpu]", "Invalid value"),
        (f"{RES}.requests[nvidia.com/gpu]", "Invalid value"),
        ("spec", "Forbidden"),
    ], "the new spec is validated, and a running pod's resources cannot change"
    lower = {"spec": {"containers": [{"name": "main", "resources": {"requests": {names.NVIDIA_GPU: "2"}}}]}}
    with pytest.raises(errors.Invalid) as e:
        pods.patch("p", lower, namespace=namespace, patch_type=STRATEGIC_MERGE_PATCH)
    assert (f"{RES}.requests", 'Invalid value: "2": must be equal to nvidia.com/gpu limit of 1') in [
        (c["field"], c["message"]) for c in e.value.causes
    ]
    labelled = pods.patch("p", {"metadata": {"labels": {"a": "b"}}}, namespace=namespace)
    assert labelled["metadata"]["labels"] == {"a": "b"} and labelled["spec"] == created["spec"]
