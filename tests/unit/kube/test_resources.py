"""`ResourceAPI` needs only a `kube.transport.Transport`, not a `Client`: that is what keeps
`kube.resources` below `kube.client` (the import-linter contract in pyproject.toml checks the
imports; this checks the seam is enough to build every request shape)."""

from __future__ import annotations

from typing import Any

import urllib3

from apis.extension import names
from kube.resources import LEASES, NODES, ResourceAPI
from kube.transport import Transport


class RecordingTransport:
    """Answers every request with `{}` and remembers (method, path, query)."""

    timeout = 7.0

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, list[tuple[str, str]]]] = []

    def request(self, method: str, path: str, **options: Any) -> Any:
        self.sent.append((method, path, list(options.get("query", ()))))
        return {}

    def open(self, method: str, path: str, **options: Any) -> urllib3.BaseHTTPResponse:
        raise AssertionError("no streams in this test")


def test_requests_go_through_any_transport() -> None:
    transport = RecordingTransport()
    seam: Transport = transport  # mypy checks the protocol is all a ResourceAPI uses
    ResourceAPI(seam, LEASES).get("tessera-scheduler", namespace="kube-system")
    ResourceAPI(seam, NODES).patch("gpu-1", {"metadata": {}})
    ResourceAPI(seam, names.DEVICES).list(label_selector="a=b")
    assert transport.sent == [
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tessera-scheduler", []),
        ("PATCH", "/api/v1/nodes/gpu-1", []),
        ("GET", "/apis/scheduling.koordinator.sh/v1alpha1/devices", [("labelSelector", "a=b")]),
    ]
