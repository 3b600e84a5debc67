"""kube.Client's own request path on real sockets: the service account, rotated tokens, client
certificates, tls-server-name, proxies, and credential plugins (through the `kubernetes` library,
which nothing else loads)."""

from __future__ import annotations

import dataclasses
import http.server
import json
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from kube import clientconfig, errors
from kube.client import Client
from kube.kubeconfig import kubeconfig
from kube.pki import CA
from kube.resources import NAMESPACES
from kube.restconfig import RESTConfig, TLSConfig, TokenFile

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secure() -> Iterator[EmbeddedAPIServer]:
    with run_apiserver(secure=True) as server:
        yield server


def namespaces(client: Client) -> list[str]:
    return [n["metadata"]["name"] for n in client.resource(NAMESPACES).list().items]


def service_account(directory: Path, server: EmbeddedAPIServer) -> dict[str, str]:
    """What kubelet mounts (token, ca.crt) and sets ($KUBERNETES_SERVICE_*) for a pod."""
    assert server.token and server.ca_pem
    directory.mkdir(exist_ok=True)
    (directory / "token").write_text(server.token)
    (directory / "ca.crt").write_bytes(server.ca_pem)
    return {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(server.port)}


def test_in_cluster_with_the_service_account_and_a_rotated_token(secure: EmbeddedAPIServer, tmp_path: Path) -> None:
    environ = service_account(tmp_path, secure)
    config = clientconfig.in_cluster(environ=environ, directory=tmp_path)
    with Client(config) as c:
        assert "default" in namespaces(c)
    rotating = dataclasses.replace(config, credentials=TokenFile(tmp_path / "token", period_s=0))
    with Client(rotating) as c:
        (tmp_path / "token").write_text("revoked")
        with pytest.raises(errors.Unauthorized):
            namespaces(c)
        (tmp_path / "token").write_text(str(secure.token))
        assert "default" in namespaces(c)


class _Answer(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a NamespaceList naming what it saw: the client certificate's common
    name, or the request target (a proxy sees the absolute URL)."""

    def do_GET(self) -> None:
        peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        seen = dict(x[0] for x in peer["subject"])["commonName"] if peer else self.path
        body = json.dumps({"kind": "NamespaceList", "metadata": {}, "items": [{"metadata": {"name": seen}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


Serve = Callable[..., int]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Start an HTTP(S) server on 127.0.0.1 answering `_Answer`; returns its port."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(context: ssl.SSLContext | None = None) -> int:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
        if context is not None:
            server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")  # insecure on purpose, once
def test_client_certificates_and_tls_server_name(serve: Serve, tmp_path: Path) -> None:
    ca = CA.create()
    server_cert = ca.issue("apiserver", server=True, dns=["kubernetes.internal"]).write(tmp_path / "server")
    names: list[str | None] = []
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=ca.pem.decode())
    context.load_cert_chain(*server_cert)
    context.verify_mode = ssl.CERT_REQUIRED

    def sni(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        names.append(name)

    context.sni_callback = sni  # type: ignore[assignment]  # typeshed wants an SSLSocket; it is one here
    server = f"https://127.0.0.1:{serve(context)}"
    me = ca.issue("tessera-agent", client=True)
    as_data = TLSConfig(ca_data=ca.pem, cert_data=me.cert_pem, key_data=me.key_pem, server_name="kubernetes.internal")
    with Client(RESTConfig(server, tls=as_data)) as c:
        assert namespaces(c) == ["tessera-agent"]
    assert names[-1] == "kubernetes.internal"
    cert, key = me.write(tmp_path / "me")
    as_files = TLSConfig(cert_file=cert, key_file=key, insecure=True)  # no CA, no name: not verified
    with Client(RESTConfig(server, tls=as_files)) as c:
        assert namespaces(c) == ["tessera-agent"]
    for tls in (
        dataclasses.replace(as_data, server_name=""),  # the certificate names kubernetes.internal, not 127.0.0.1
        TLSConfig(ca_data=ca.pem, server_name="kubernetes.internal"),  # no client certificate
    ):
        with Client(RESTConfig(server, tls=tls), retries=0) as c, pytest.raises(errors.Unreachable):
            namespaces(c)


def test_requests_go_through_the_kubeconfig_or_environment_proxy(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = f"http://127.0.0.1:{serve()}"
    target = "http://apiserver.invalid:8080"
    with Client(RESTConfig(target, proxy_url=proxy)) as c:
        assert namespaces(c) == [f"{target}/api/v1/namespaces"]
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.setenv("NO_PROXY", "localhost")
    with Client(RESTConfig(target)) as c:
        assert namespaces(c) == [f"{target}/api/v1/namespaces"]
    monkeypatch.setenv("NO_PROXY", ".invalid")
    with Client(RESTConfig(target), retries=0) as c, pytest.raises(errors.Unreachable):
        namespaces(c)  # straight to apiserver.invalid, which does not resolve


def _kubeconfig_with_plugin(path: Path, server: EmbeddedAPIServer, token: str) -> Path:
    """A kubeconfig whose user gets its token from an exec plugin, as cloud logins do."""
    plugin = path.parent / "plugin.py"
    version = "client.authentication.k8s.io/v1beta1"
    credential = {"apiVersion": version, "kind": "ExecCredential", "status": {"token": token}}
    plugin.write_text(f"import json\nprint(json.dumps({credential!r}))\n")
    doc = kubeconfig(server.url, ca_pem=server.ca_pem)
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": version,
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    path.write_text(yaml.safe_dump(doc))
    return path


_LIST_AND_SAY_IF_THE_LIBRARY_LOADED = """
import sys
from kube.client import Client
from kube.resources import NAMESPACES
with Client.from_kubeconfig(sys.argv[1]) as c:
    names = [n["metadata"]["name"] for n in c.resource(NAMESPACES).list().items]
print("default" in names, "kubernetes" in sys.modules)
"""


def test_only_a_credential_plugin_loads_the_kubernetes_library(secure: EmbeddedAPIServer, tmp_path: Path) -> None:
    assert secure.token
    plugin = _kubeconfig_with_plugin(tmp_path / "plugin-kubeconfig", secure, secure.token)
    for path, expected in ((secure.kubeconfig, "True False"), (plugin, "True True")):
        run = subprocess.run(
            [sys.executable, "-c", _LIST_AND_SAY_IF_THE_LIBRARY_LOADED, str(path)],
            check=False,
            capture_output=True,
            text=True,
        )
        assert run.stdout.strip() == expected, run.stderr
    wrong = _kubeconfig_with_plugin(tmp_path / "wrong", secure, "wrong")
    with Client.from_kubeconfig(wrong) as c, pytest.raises(errors.Unauthorized):
        namespaces(c)
