"""A server with a token speaks HTTPS and refuses requests without the token."""

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from kube import errors
from kube.client import Client
from kube.kubeconfig import write_kubeconfig
from kube.resources import NAMESPACES
from kube.restconfig import RESTConfig

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secure() -> Iterator[EmbeddedAPIServer]:
    with run_apiserver(secure=True) as server:
        yield server


def get(server: EmbeddedAPIServer, path: str, token: str | None) -> int:
    context = server.ssl_context()
    request = urllib.request.Request(f"{server.url}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_token_is_required_except_for_health(secure: EmbeddedAPIServer) -> None:
    assert secure.url.startswith("https://") and secure.token
    assert get(secure, "/api/v1/namespaces", None) == 401
    assert get(secure, "/api/v1/namespaces", "wrong") == 401
    assert get(secure, "/api/v1/namespaces", secure.token) == 200
    assert get(secure, "/readyz", None) == 200


def test_kubeconfig_client_works_and_a_wrong_token_is_unauthorized(secure: EmbeddedAPIServer, tmp_path: Path) -> None:
    with secure.client() as c:
        assert "default" in [n["metadata"]["name"] for n in c.resource(NAMESPACES).list().items]
    wrong = tmp_path / "wrong-token"
    write_kubeconfig(wrong, secure.url, token="nope", ca_pem=secure.ca_pem)
    with Client.from_kubeconfig(wrong) as c, pytest.raises(errors.Unauthorized):
        c.resource(NAMESPACES).list()


def test_plain_http_to_a_tls_server_is_unreachable(secure: EmbeddedAPIServer) -> None:
    config = RESTConfig(secure.url.replace("https://", "http://"))
    with Client(config, retries=0) as c, pytest.raises(errors.APIError):
        c.resource(NAMESPACES).list()
