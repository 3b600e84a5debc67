"""A server one client cannot stall: behaviour under abuse (the numbers are `tessera bench apiserver-flood`'s).

A connection that never finishes its request header is closed after the header timeout;
connections beyond the cap are closed as they arrive; one identity's requests beyond its seats
queue, and beyond its queue get kube's 429 with Retry-After; watches are counted per user; a
query over 8 KiB reaches the handlers and gets a Status; large YAML is decoded off the event loop
and refused past its node limit. The identities are impersonated by the (unauthenticated,
system:masters) test client, so each test has flows of its own.
"""

import json
import select
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from apiserver.bodies import INLINE_YAML_BYTES, MAX_YAML_NODES
from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver

pytestmark = pytest.mark.integration

CM = "/api/v1/namespaces/default/configmaps"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedAPIServer]:
    flags = ["--request-header-timeout", "1", "--max-requests-inflight", "16", "--max-watches-per-user", "2"]
    with run_apiserver(tmp_path_factory.mktemp("limits"), extra_args=flags) as s:
        yield s


def connect(server: EmbeddedAPIServer) -> socket.socket:
    parts = urlsplit(server.url)
    sock = socket.create_connection((parts.hostname or "", parts.port or 0), timeout=30)
    return sock


def request(
    method: str,
    path: str,
    *,
    user: str = "",
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    length: int = -1,
) -> bytes:
    """The bytes of a request; `length` announces a body longer than the one sent."""
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", f"Content-Length: {len(body) if length < 0 else length}"]
    lines += [f"Impersonate-User: {user}"] if user else []
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one response (Content-Length or a first chunk)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    length = int(headers.get("content-length", "0") or 0)
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(status_line.split()[1]), headers, rest


def test_a_connection_that_never_finishes_its_header_is_closed(server: EmbeddedAPIServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /api HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        assert sock.recv(1024) == b"", "the server closes it (after --request-header-timeout)"
    with connect(server) as sock:  # and a complete one is served as ever
        sock.sendall(request("GET", "/version"))
        assert response(sock)[0] == 200


def test_one_identity_past_its_queue_gets_kubes_429(server: EmbeddedAPIServer) -> None:
    socks = []
    try:
        holder = connect(server)  # holds mallory's only seat (a quarter of 4): its body never arrives
        socks.append(holder)
        holder.sendall(request("POST", CM, user="mallory", length=100))
        waiting = [connect(server) for _ in range(60)]  # 50 wait in mallory's queue; the rest are refused
        socks += waiting
        for sock in waiting:
            sock.sendall(request("GET", CM, user="mallory"))
        answered, _, _ = select.select(waiting, [], [], 10)
        replies = [response(sock) for sock in answered]
        refused = [(headers, json.loads(body)) for status, headers, body in replies if status == 429]
        assert refused, [status for status, _, _ in replies]
        headers, status_doc = refused[0]
        assert headers["retry-after"] == "1"
        assert status_doc["kind"] == "Status" and status_doc["reason"] == "TooManyRequests"
        assert status_doc["message"] == "Too many requests, please try again later."
        with connect(server) as other:  # another identity of the same level is served meanwhile
            other.sendall(request("GET", CM, user="alice"))
            assert response(other)[0] == 200
    finally:
        for sock in socks:
            sock.close()


def test_watches_are_limited_per_user(server: EmbeddedAPIServer) -> None:
    watches = [connect(server) for _ in range(2)]
    try:
        for sock in watches:
            sock.sendall(request("GET", f"{CM}?watch=1", user="carol"))
            status, _, _ = response(sock)
            assert status == 200
        with connect(server) as third:
            third.sendall(request("GET", f"{CM}?watch=1", user="carol"))
            status, _, body = response(third)
            assert status == 429 and "too many watches" in json.loads(body)["message"]
        with connect(server) as dave:
            dave.sendall(request("GET", f"{CM}?watch=1", user="dave"))
            assert response(dave)[0] == 200
    finally:
        for sock in watches:
            sock.close()


def test_a_query_over_8_kib_gets_a_status(server: EmbeddedAPIServer) -> None:
    selector = quote("a in (" + ",".join(f"v{i}" for i in range(2000)))  # 13 KiB, unbalanced
    with connect(server) as sock:
        sock.sendall(request("GET", f"{CM}?labelSelector={selector}"))
        status, headers, body = response(sock)
    assert status == 400 and headers["content-type"].startswith("application/json")
    assert json.loads(body)["kind"] == "Status"
    with connect(server) as sock:
        sock.sendall(request("GET", f"{CM}?labelSelector={selector}%29"))
        assert response(sock)[0] == 200


def test_large_yaml_is_decoded_in_the_worker_and_refused_past_its_node_limit(server: EmbeddedAPIServer) -> None:
    yaml_type = {"Content-Type": "application/yaml"}
    data = "".join(f"  k{i}: v{i}\n" for i in range(3000))
    body = f"metadata:\n  name: big-yaml\ndata:\n{data}".encode()
    assert len(body) > INLINE_YAML_BYTES
    with connect(server) as sock:
        sock.sendall(request("POST", CM, body=body, headers=yaml_type))
        status, _, created = response(sock)
    assert status == 201, created
    assert json.loads(created)["data"]["k2999"] == "v2999"
    review = b"apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  extra:\n    k:\n"
    review += b"    - x\n" * (MAX_YAML_NODES + 1)
    with connect(server) as sock:
        sock.sendall(
            request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=review, headers=yaml_type)
        )
        status, _, refused = response(sock)
    assert status == 413 and "more than 100000 nodes" in json.loads(refused)["message"]


def test_connections_beyond_the_cap_are_closed(tmp_path: Path) -> None:
    with run_apiserver(tmp_path, extra_args=["--max-connections", "4"]) as capped:
        idle = [connect(capped) for _ in range(4)]
        try:
            with connect(capped) as extra:
                assert extra.recv(1024) == b"", "closed at once: four are open"
        finally:
            for sock in idle:
                sock.close()
        with capped.client() as client:  # once they are gone, clients are served
            assert client.request("GET", "/version")["major"] == "1"


def test_failed_tls_handshakes_leave_no_count_behind(tmp_path: Path) -> None:
    """A connection whose TLS handshake fails was never admitted: it must not use up the cap."""
    with run_apiserver(tmp_path, secure=True, extra_args=["--max-connections", "2"]) as capped:
        for _ in range(4):
            with connect(capped) as garbage:
                garbage.sendall(b"GET / HTTP/1.1\r\n\r\n")  # not a TLS ClientHello
                garbage.recv(1024)  # the server gives up on it
        with capped.client() as client:
            assert client.request("GET", "/version")["major"] == "1"
