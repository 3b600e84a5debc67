"""One identity floods the API server; another's latency, quiet and under the flood.

`tessera bench apiserver-flood` starts `tessera apiserver` as `tessera up` runs it (HTTPS, bearer
tokens, RBAC) with two plain users in the same priority level: `victim`, who reads and creates
ConfigMaps one request at a time, and `flooder`, who is allowed only what every user is
(discovery, access reviews). The victim's requests are timed for `--seconds` while nothing else
happens, then for as long again while the flooder, from `--flooders` threads, posts megabyte YAML
SelfSubjectAccessReviews (`--body-mb`; `--shape nodes`: a list of short strings, past the YAML
node limit; `strings`: a few long strings, decoded and answered) and `--slow-connections`
connections without a token trickle an unfinished request header (`--body-format json` sends
the same reviews as JSON). The result is the victim's p50/p99 in both phases and their ratio (the
goal: under 2), what the flood got (status codes, connections the server closed) and the
server's resident memory.

This is the finding of issue 33 as a benchmark: before fair queuing and off-loop decoding, one
such client froze the server for seconds at a time (an admin GET took 7.6 s instead of 4 ms).
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import socket
import ssl
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from apis.errors import ConfigError
from cli.bench._report import Latencies, Report
from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver

__all__ = ["FloodSettings", "add_arguments", "run"]

_TOKENS = {"victim": "victim-token-0123456789abcdef", "flooder": "flooder-token-0123456789abcdef"}
_RBAC = "rbac.authorization.k8s.io"
_CM = "/api/v1/namespaces/default/configmaps"
_SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@dataclass(frozen=True, slots=True)
class FloodSettings:
    #: How long each phase (quiet, flood) times the victim.
    seconds: float = 10.0
    flooders: int = 4
    body_mb: float = 2.9
    #: `nodes` (many short strings) or `strings` (a few long ones).
    shape: str = "nodes"
    slow_connections: int = 300
    #: The flood's bodies as `yaml` (the finding) or `json`.
    body_format: str = "yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = FloodSettings()
    parser.add_argument("--seconds", type=float, default=d.seconds, help="length of each phase (default 10)")
    parser.add_argument("--flooders", type=int, default=d.flooders, help="threads posting big YAML bodies")
    parser.add_argument("--body-mb", type=float, default=d.body_mb, help="size of each YAML body (default 2.9)")
    parser.add_argument("--shape", choices=("nodes", "strings"), default=d.shape, help="what the YAML body is made of")
    parser.add_argument(
        "--slow-connections", type=int, default=d.slow_connections, help="connections with an unfinished header"
    )
    parser.add_argument(
        "--body-format", choices=("yaml", "json"), default=d.body_format, help="the flood's bodies (default yaml)"
    )


def run(args: argparse.Namespace, report: Report) -> int:
    settings = FloodSettings(
        args.seconds, args.flooders, args.body_mb, args.shape, args.slow_connections, args.body_format
    )
    if settings.seconds <= 0 or settings.flooders < 0 or settings.slow_connections < 0:
        raise ConfigError("need --seconds > 0 and no negative counts")
    report.setting(**asdict(settings))
    with tempfile.TemporaryDirectory(prefix="tessera-flood-") as scratch:
        tokens = Path(scratch) / "tokens.csv"
        tokens.write_text("".join(f"{token},{user},,\n" for user, token in _TOKENS.items()), encoding="utf-8")
        tokens.chmod(0o600)
        flags = ["--token-auth-file", str(tokens)]
        with run_apiserver(Path(scratch) / "server", secure=True, verbosity=1, extra_args=flags) as server:
            _grant_victim(server)
            _measure(server, settings, report)
    return 0


def _grant_victim(server: EmbeddedAPIServer) -> None:
    role = {
        "apiVersion": f"{_RBAC}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "bench-victim"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "delete"]}],
    }
    binding = {
        "apiVersion": f"{_RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "bench-victim"},
        "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": "bench-victim"},
        "subjects": [{"apiGroup": _RBAC, "kind": "User", "name": "victim"}],
    }
    with server.client() as admin:
        admin.request("POST", f"/apis/{_RBAC}/v1/clusterroles", body=role)
        admin.request("POST", f"/apis/{_RBAC}/v1/clusterrolebindings", body=binding)
        admin.request("POST", _CM, body={"metadata": {"name": "bench-read"}, "data": {"k": "v"}})


class _Connection:
    """One keep-alive HTTPS connection as a user; reconnects when the server closed it."""

    def __init__(self, server: EmbeddedAPIServer, token: str) -> None:
        parts = urlsplit(server.url)
        self._host, self._port = parts.hostname or "", parts.port or 0
        context = server.ssl_context()
        assert context is not None
        self._context = context
        self._headers = {"Authorization": f"Bearer {token}"}
        self._conn: http.client.HTTPSConnection | None = None

    def request(self, method: str, path: str, body: bytes | None = None, content_type: str = "") -> int:
        headers = dict(self._headers)
        if content_type:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = http.client.HTTPSConnection(self._host, self._port, context=self._context, timeout=120)
            try:
                self._conn.request(method, path, body=body, headers=headers)
                response = self._conn.getresponse()
                response.read()
                return response.status
            except (OSError, http.client.HTTPException):
                self._conn.close()
                self._conn = None
                if attempt == 2:
                    return 0
        return 0

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def _victim(server: EmbeddedAPIServer, seconds: float, phase: str) -> list[float]:
    """GET a ConfigMap, create one, delete it; each request timed, for `seconds`."""
    conn = _Connection(server, _TOKENS["victim"])
    samples: list[float] = []
    deadline = time.monotonic() + seconds
    n = 0
    try:
        while time.monotonic() < deadline:
            n += 1
            name = f"v-{phase}-{n}"
            body = json.dumps({"metadata": {"name": name}, "data": {"n": str(n)}}).encode()
            for method, path, data in (
                ("GET", f"{_CM}/bench-read", None),
                ("POST", _CM, body),
                ("DELETE", f"{_CM}/{name}", None),
            ):
                started = time.perf_counter()
                status = conn.request(method, path, data, "application/json" if data else "")
                samples.append(time.perf_counter() - started)
                if status >= 300:
                    raise RuntimeError(f"the victim's {method} {path} got {status}")
    finally:
        conn.close()
    return samples


def _body(settings: FloodSettings) -> bytes:
    if settings.body_format == "json":
        doc = yaml.safe_load(_yaml_body(settings))
        return json.dumps(doc).encode()
    return _yaml_body(settings)


def _yaml_body(settings: FloodSettings) -> bytes:
    size = int(settings.body_mb * 1024 * 1024)
    head = "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n"
    head += "  resourceAttributes: {verb: get, resource: pods}\n  extra:\n    k:\n"
    if settings.shape == "nodes":
        item = "    - flood\n"
        return (head + item * (size // len(item))).encode()
    chunk = 64 * 1024
    return (head + "".join(f"    - {'x' * chunk}\n" for _ in range(size // chunk))).encode()


def _flooder(
    server: EmbeddedAPIServer, body: bytes, content_type: str, stop: threading.Event, codes: collections.Counter[int]
) -> None:
    conn = _Connection(server, _TOKENS["flooder"])
    try:
        while not stop.is_set():
            codes[conn.request("POST", _SSAR, body, content_type)] += 1
    finally:
        conn.close()


def _slow(server: EmbeddedAPIServer, count: int, stop: threading.Event, closed: list[int]) -> None:
    """Keep `count` TLS connections with an unfinished header open, trickling a byte now and then;
    open another for each the server closes."""
    parts = urlsplit(server.url)
    context = server.ssl_context()
    assert context is not None
    socks: list[ssl.SSLSocket] = []

    def opened() -> ssl.SSLSocket | None:
        try:
            raw = socket.create_connection((parts.hostname or "", parts.port or 0), timeout=5)
            sock = context.wrap_socket(raw, server_hostname=parts.hostname)
            sock.sendall(b"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            sock.setblocking(False)
            return sock
        except OSError:
            return None

    while len(socks) < count and not stop.is_set():
        sock = opened()
        if sock is not None:
            socks.append(sock)
    while not stop.wait(1.0):
        for i, sock in enumerate(socks):
            try:
                sock.sendall(b"a")
                if sock.recv(1) == b"":
                    raise OSError("closed")
            except (ssl.SSLWantReadError, BlockingIOError):
                continue
            except OSError:
                closed[0] += 1
                sock.close()
                socks[i] = opened() or sock
    for sock in socks:
        sock.close()


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _measure(server: EmbeddedAPIServer, settings: FloodSettings, report: Report) -> None:
    pid = server.pid
    assert pid is not None
    rss_before = _rss_mib(pid)
    _victim(server, min(2.0, settings.seconds), "warmup")
    quiet = Latencies.of(_victim(server, settings.seconds, "quiet"))
    report.latencies(quiet, "quiet", label="victim, quiet")
    stop = threading.Event()
    codes: collections.Counter[int] = collections.Counter()
    closed = [0]
    body = _body(settings)
    content_type = f"application/{settings.body_format}"
    threads = [
        threading.Thread(target=_flooder, args=(server, body, content_type, stop, codes))
        for _ in range(settings.flooders)
    ]
    if settings.slow_connections:
        threads.append(threading.Thread(target=_slow, args=(server, settings.slow_connections, stop, closed)))
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)  # the flood under way
        flooded = Latencies.of(_victim(server, settings.seconds, "flood"))
    finally:
        rss_flood = _rss_mib(pid)
        stop.set()
        for thread in threads:
            thread.join()
    report.latencies(flooded, "flood", label="victim, under the flood")
    report.value("p99_ratio", round(flooded.p99_ms / quiet.p99_ms, 2), "x", label="victim p99 flood / quiet (goal < 2)")
    report.value("p50_ratio", round(flooded.p50_ms / quiet.p50_ms, 2), "x", label="victim p50 flood / quiet")
    for code, count in sorted(codes.items()):
        report.value(f"flood_status_{code}", count, "requests", label=f"flood requests answered {code or 'by a reset'}")
    report.value("slow_closed", closed[0], "connections", label="unfinished-header connections the server closed")
    report.value("rss_before_mib", round(rss_before, 1), "MiB", label="server RSS before")
    report.value("rss_flood_mib", round(rss_flood, 1), "MiB", label="server RSS at the end of the flood")
