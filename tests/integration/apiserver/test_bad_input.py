"""Nothing a client sends can crash or wedge the server: bad input gets a 4xx Status body."""

import http.client
import json
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.launchers.apiserver import EmbeddedAPIServer

pytestmark = pytest.mark.integration


def send(
    server: EmbeddedAPIServer, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"
) -> tuple[int, dict[str, object]]:
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        headers = {"Content-Type": content_type} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    try:
        doc = json.loads(data)
    except ValueError:
        doc = {"raw": data.decode(errors="replace")}
    return response.status, doc


CM = "/api/v1/namespaces/default/configmaps"


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "code"),
    [
        ("POST", CM, b"{not json", "application/json", 400),
        ("POST", CM, b"a: &a [1]\nb: *a\n", "application/yaml", 400),
        ("POST", CM, b'{"kind": "Pod", "metadata": {"name": "x"}}', "application/json", 400),
        ("POST", CM, b'{"apiVersion": "v2", "metadata": {"name": "x"}}', "application/json", 400),
        ("POST", CM, b"[1, 2, 3]", "application/json", 400),
        ("POST", CM, b'"just a string"', "application/json", 400),
        ("POST", CM, b'{"metadata": {"name": "Not_Valid"}}', "application/json", 422),
        ("POST", "/api/v1/namespaces/nowhere/configmaps", b'{"metadata": {"name": "x"}}', "application/json", 404),
        # ConfigMaps are taken in protobuf (Helm's client-go sends them so): JSON bytes are no envelope.
        ("POST", CM, b'{"metadata": {"name": "x"}}', "application/vnd.kubernetes.protobuf", 400),
        ("POST", "/api/v1/namespaces/default/services", b"k8s\x00", "application/vnd.kubernetes.protobuf", 415),
        ("POST", "/api/v1/namespaces/default/widgets", b"{}", "application/json", 404),
        ("POST", "/api/v1/pods", b"{}", "application/json", 404),
        ("POST", f"{CM}/x", b"{}", "application/json", 405),
        ("GET", "/api/v1/pods/x", None, "", 404),
        ("GET", f"{CM}?labelSelector=a%20in%20(", None, "", 400),
        ("GET", f"{CM}?fieldSelector=spec.nope%3Dx", None, "", 400),
        ("GET", f"{CM}?limit=-1", None, "", 400),
        ("GET", f"{CM}?limit=abc", None, "", 400),
        ("GET", f"{CM}?continue=%%%", None, "", 400),
        ("GET", f"{CM}?watch=1&resourceVersion=abc", None, "", 400),
        ("GET", f"{CM}?dryRun=Some", None, "", 200),
        ("POST", f"{CM}?dryRun=Some", b'{"metadata": {"name": "x"}}', "application/json", 400),
        ("PATCH", f"{CM}/missing", b"{}", "application/merge-patch+json", 404),
        ("PATCH", "/api/v1/namespaces/default", b"{}", "text/plain", 415),
        ("PATCH", "/api/v1/namespaces/default", b'{"op": "add"}', "application/json-patch+json", 422),
        ("PATCH", "/api/v1/namespaces/default", b"[", "application/json-patch+json", 400),
        ("PUT", "/api/v1/namespaces/default", b'{"metadata": {"name": "other"}}', "application/json", 400),
        ("DELETE", "/api/v1/namespaces/default/configmaps/missing", b"{bad", "application/json", 400),
        (
            "POST",
            "/api/v1/namespaces/default/pods/missing/binding",
            b'{"target": {"name": "n"}}',
            "application/json",
            404,
        ),
        ("POST", "/api/v1/namespaces/default/pods/missing/binding", b'{"target": {}}', "application/json", 422),
        ("GET", "/apis/no.such.group/v1", None, "", 404),
        ("GET", "/nonsense", None, "", 404),
        ("DELETE", "/api/v1/namespaces", None, "", 405),
        ("DELETE", "/api/v1/namespaces/default", None, "", 403),
        ("PUT", "/api/v1/namespaces/default/bindings", b"{}", "application/json", 405),
    ],
)
def test_bad_requests_get_a_status(  # noqa: PLR0917  # pytest passes parameters positionally
    apiserver: EmbeddedAPIServer, method: str, path: str, body: bytes | None, content_type: str, code: int
) -> None:
    status, doc = send(apiserver, method, path, body, content_type)
    assert status == code, doc
    if code >= 400:
        assert doc["kind"] == "Status" and doc["code"] == code and doc["status"] == "Failure"


def test_oversized_requests_and_objects_are_413(apiserver: EmbeddedAPIServer) -> None:
    huge = json.dumps({"metadata": {"name": "huge"}, "data": {"x": "y" * (4 * 1024 * 1024)}}).encode()
    status, doc = send(apiserver, "POST", CM, huge)
    assert status == 413 and doc["reason"] == "RequestEntityTooLarge"
    big = json.dumps({"metadata": {"name": "big"}, "data": {"x": "y" * (2 * 1024 * 1024)}}).encode()
    status, doc = send(apiserver, "POST", CM, big)
    assert status == 413 and "limit is" in str(doc["message"])


PATHS = st.sampled_from(
    [
        CM,
        f"{CM}/fz",
        "/api/v1/namespaces/default/pods",
        "/api/v1/nodes/n",
        "/api/v1/namespaces",
        "/apis/scheduling.koordinator.sh/v1alpha1/devices",
    ]
)
TYPES = st.sampled_from(
    [
        "application/json",
        "application/yaml",
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "text/plain",
    ]
)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    method=st.sampled_from(["POST", "PUT", "PATCH", "DELETE"]),
    path=PATHS,
    content_type=TYPES,
    body=st.one_of(st.binary(max_size=200), JSONISH.map(lambda v: json.dumps(v).encode())),
)
def test_fuzzed_requests_never_fail_the_server(
    apiserver: EmbeddedAPIServer, method: str, path: str, content_type: str, body: bytes
) -> None:
    status, doc = send(apiserver, method, path, body, content_type)
    assert status < 500, doc
    if status >= 400:
        assert doc.get("kind") == "Status", doc


def test_server_is_healthy_after_the_abuse(apiserver: EmbeddedAPIServer) -> None:
    status, _ = send(apiserver, "GET", "/readyz")
    assert status == 200
    status, doc = send(apiserver, "GET", "/api/v1/namespaces/default")
    assert status == 200 and doc["metadata"]["name"] == "default"  # type: ignore[index]
