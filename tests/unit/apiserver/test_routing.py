"""The URL grammar: which resource, namespace, name and subresource a path addresses."""

import pytest

from apiserver.routing import RequestInfo, parse_path


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/v1/pods", dict(resource="pods")),
        ("/api/v1/namespaces/ns/pods", dict(resource="pods", namespace="ns", namespaced_path=True)),
        ("/api/v1/namespaces/ns/pods/p", dict(resource="pods", namespace="ns", name="p", namespaced_path=True)),
        (
            "/api/v1/namespaces/ns/pods/p/status",
            dict(resource="pods", namespace="ns", name="p", subresource="status", namespaced_path=True),
        ),
        ("/api/v1/namespaces", dict(resource="namespaces")),
        ("/api/v1/namespaces/ns", dict(resource="namespaces", name="ns")),
        ("/api/v1/namespaces/ns/status", dict(resource="namespaces", name="ns", subresource="status")),
        ("/api/v1/nodes/n1/status", dict(resource="nodes", name="n1", subresource="status")),
        (
            "/apis/scheduling.koordinator.sh/v1alpha1/devices/n1",
            dict(group="scheduling.koordinator.sh", version="v1alpha1", resource="devices", name="n1"),
        ),
        ("/api/v1/namespaces/ns/pods/p/status/extra", dict(resource="pods", name="p", extra=True, namespace="ns")),
        ("/api/v1/namespaces/a%2Fb/pods", dict(resource="pods", namespace="a/b", namespaced_path=True)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_resource_paths(path: str, expected: dict[str, object]) -> None:
    info = parse_path(path)
    assert info.is_resource
    for field, value in expected.items():
        assert getattr(info, field) == value, field
    assert info.version == expected.get("version", "v1")


@pytest.mark.parametrize("path", ["/", "/healthz", "/api", "/api/v1", "/apis", "/apis/g", "/apis/g/v1", "/version"])
def test_non_resource_paths(path: str) -> None:
    assert not parse_path(path).is_resource


def test_discovery_paths_keep_group_and_version() -> None:
    assert parse_path("/apis/g/v1") == RequestInfo("/apis/g/v1", prefix="apis", group="g", version="v1")
    assert parse_path("/api/v1").version == "v1"
