"""A component's HTTP endpoints, authenticated and authorized through a real API server.

`kube.serving.Server` with a `kube.delegation.Delegation` on the embedded API server over HTTPS,
asked over real sockets with real tokens: anonymous writes are refused with kube's 403, a bad
token is kube's 401, RBAC's non-resource rules decide (`get` on `/metrics` for a scraper), health
stays open, answers are cached for their TTL (on a clock the test moves), and what a web page
makes a browser send (another Host, another Origin) is refused before anything else.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from cli.localcluster import identities
from kube import serving
from kube.client import Client
from kube.delegation import Delegation
from kube.kubeconfig import write_kubeconfig
from tests.support.clocks import FakeClock

pytestmark = pytest.mark.integration

RBAC = "rbac.authorization.k8s.io"
SCRAPER = identities.Identity("prometheus")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedAPIServer, dict[str, str]]]:
    directory = tmp_path_factory.mktemp("delegation")
    component = identities.Identity("tessera-scheduler")
    tokens = identities.ensure_tokens(directory / "tokens.csv", [component, SCRAPER])
    with run_apiserver(
        directory, secure=True, extra_args=["--token-auth-file", str(directory / "tokens.csv")]
    ) as server:
        with server.client() as admin:
            identities.apply_manifests(admin, identities.rbac_manifests())  # auth-delegator, metrics reader
            binding = {
                "apiVersion": f"{RBAC}/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "prometheus:tessera-metrics-reader"},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "tessera-metrics-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": identities.NAMESPACE}],
            }
            identities.apply_manifests(admin, [binding])
        kubeconfigs = identities.component_kubeconfigs(directory / "kubeconfigs", server.kubeconfig, tokens)
        assert server.token is not None
        yield (
            server,
            {
                "component": str(kubeconfigs["tessera-scheduler"]),
                "scraper": tokens["prometheus"],
                "admin": server.token,
            },
        )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture
def server(cluster: tuple[EmbeddedAPIServer, dict[str, str]], clock: FakeClock) -> Iterator[serving.Server]:
    """A component's server, asking the API server as the component (its own ServiceAccount)."""
    with Client.from_kubeconfig(cluster[1]["component"]) as client:

        def clear(request: serving.Request) -> serving.Response:
            assert request.caller is not None
            return serving.Response.text(f"cleared by {request.caller.name}")

        http = serving.Server(
            "test HTTP",
            host="127.0.0.1",
            port=0,
            registry=CollectorRegistry(),
            routes=[serving.Route("POST", "/health/clear", clear)],
            auth=Delegation(client, clock=clock),
        )
        http.start()
        try:
            yield http
        finally:
            http.stop()


def ask(
    server: serving.Server, method: str, path: str, *, token: str = "", headers: dict[str, str] | None = None
) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.port}{path}", method=method, data=b"" if method == "POST" else None
    )
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.read().decode()


def status(body: str) -> tuple[str, str]:
    doc = json.loads(body)
    assert doc["kind"] == "Status" and doc["status"] == "Failure"
    return doc["reason"], doc["message"]


def test_anonymous_writes_and_reads_are_refused_as_kube_refuses_them(server: serving.Server) -> None:
    code, body = ask(server, "POST", "/health/clear?minor=3")
    assert code == 403
    assert status(body) == ("Forbidden", 'forbidden: User "system:anonymous" cannot post path "/health/clear"')
    code, body = ask(server, "GET", "/metrics")
    assert (code, status(body)[1]) == (403, 'forbidden: User "system:anonymous" cannot get path "/metrics"')
    code, body = ask(server, "GET", "/no-such-path")  # authorized before routing: no 404 to strangers
    assert code == 403
    assert ask(server, "GET", "/healthz") == (200, "ok\n")


def test_a_bad_token_is_401(server: serving.Server) -> None:
    code, body = ask(server, "GET", "/metrics", token="not-a-token")
    assert (code, status(body)) == (401, ("Unauthorized", "Unauthorized"))
    code, _ = ask(server, "GET", "/metrics", headers={"Authorization": "Basic dTpw"})
    assert code == 401


def test_rbac_decides(server: serving.Server, cluster: tuple[EmbeddedAPIServer, dict[str, str]]) -> None:
    tokens = cluster[1]
    assert ask(server, "GET", "/metrics", token=tokens["scraper"])[0] == 200
    code, body = ask(server, "POST", "/health/clear", token=tokens["scraper"])
    assert (code, status(body)[1]) == (
        403,
        'forbidden: User "system:serviceaccount:tessera-system:prometheus" cannot post path "/health/clear"',
    )
    assert ask(server, "POST", "/health/clear", token=tokens["admin"]) == (200, "cleared by tessera-admin\n")


def test_answers_are_cached_for_their_ttl(
    server: serving.Server, cluster: tuple[EmbeddedAPIServer, dict[str, str]], clock: FakeClock
) -> None:
    api, tokens = cluster
    assert ask(server, "GET", "/metrics", token=tokens["scraper"])[0] == 200
    with api.client() as admin:
        admin.request("DELETE", f"/apis/{RBAC}/v1/clusterrolebindings/prometheus:tessera-metrics-reader")
        try:
            assert ask(server, "GET", "/metrics", token=tokens["scraper"])[0] == 200, "cached for 10 s"
            clock.now += 10.5
            assert ask(server, "GET", "/metrics", token=tokens["scraper"])[0] == 403
        finally:
            binding = {
                "metadata": {"name": "prometheus:tessera-metrics-reader"},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "tessera-metrics-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": identities.NAMESPACE}],
            }
            admin.request("POST", f"/apis/{RBAC}/v1/clusterrolebindings", body=binding)


def test_web_pages_cannot_reach_it(server: serving.Server, cluster: tuple[EmbeddedAPIServer, dict[str, str]]) -> None:
    admin = cluster[1]["admin"]
    code, body = ask(server, "POST", "/health/clear", token=admin, headers={"Host": "evil.example"})
    assert code == 403 and "DNS rebinding" in status(body)[1]
    cross = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
    code, body = ask(server, "POST", "/health/clear", token=admin, headers=cross)
    assert code == 403 and "cross-site" in status(body)[1]
    same = {"Host": f"localhost:{server.port}", "Origin": f"http://localhost:{server.port}"}
    assert ask(server, "POST", "/health/clear", token=admin, headers=same)[0] == 200


def test_an_api_server_that_cannot_be_asked_is_401_and_500_not_a_yes(tmp_path: Path) -> None:
    # Nothing listens on the kubeconfig's port: nobody is authenticated; anonymous is not authorized.
    write_kubeconfig(tmp_path / "nowhere", "http://127.0.0.1:9", token="t")
    with Client.from_kubeconfig(tmp_path / "nowhere") as client:
        http = serving.Server("t", host="127.0.0.1", port=0, registry=CollectorRegistry(), auth=Delegation(client))
        assert http.dispatch("GET", "/metrics", headers={"Authorization": "Bearer x"}).status == 401
        assert http.dispatch("GET", "/metrics").status == 500
        assert http.dispatch("GET", "/healthz").status == 200
