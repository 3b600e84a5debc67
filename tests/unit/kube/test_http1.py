"""kube.http1 against a scripted server on a real socket: framing, kept-alive connections, what is
sent again after a broken connection and what is not, timeouts and bad answers."""

from __future__ import annotations

import socket
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from kube.http1 import BadResponse, ConnectionPool

#: One answer: the bytes to send (None: send nothing), then whether to close the connection.
Reply = tuple[bytes | None, bool]


def ok(body: bytes = b"{}", *, extra: str = "") -> Reply:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra.encode(), body), False


HANG_UP: Reply = (None, True)


@dataclass
class Scripted:
    """Reads whole requests on 127.0.0.1 and answers each with the next scripted reply."""

    replies: deque[Reply]
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    pools: list[ConnectionPool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + buffer[:length])
                buffer = buffer[length:]
                data, close = self.replies.popleft()
                if data:
                    conn.sendall(data)
                if close:
                    return

    def pool(self) -> ConnectionPool:
        self.pools.append(ConnectionPool("http", "127.0.0.1", self.port))
        return self.pools[-1]

    def close(self) -> None:
        for pool in self.pools:
            pool.close()
        self.listener.close()


@pytest.fixture
def server() -> Iterator[Scripted]:
    s = Scripted(deque())
    yield s
    s.close()


def call(pool: ConnectionPool, method: str = "GET", target: str = "/x", body: bytes | None = None) -> tuple[int, bytes]:
    response = pool.request(method, target, {"Accept": "application/json"}, body, connect_timeout=2, read_timeout=2)
    return response.status, response.body


def test_a_kept_alive_connection_carries_one_request_after_another(server: Scripted) -> None:
    server.replies.extend([ok(b'{"a":1}'), ok(b'{"b":2}', extra="X-Twice: 1\r\nX-Twice: 2\r\n")])
    pool = server.pool()
    assert call(pool, "POST", "/p", b'{"x":1}') == (200, b'{"a":1}')
    response = pool.request("GET", "/g", {}, connect_timeout=2, read_timeout=2)
    assert (response.status, response.body, response.headers["x-twice"]) == (200, b'{"b":2}', "1, 2")
    assert server.connections == 1
    first, second = server.requests
    assert first.startswith(b"POST /p HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % server.port)
    assert b"Content-Length: 7\r\n" in first and first.endswith(b'\r\n\r\n{"x":1}')
    assert second.startswith(b"GET /g HTTP/1.1\r\n") and b"Content-Length" not in second


def test_chunked_bodies_interim_answers_and_bodiless_statuses(server: Scripted) -> None:
    chunked = (
        b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\n{"a"\r\n3\r\n:1}\r\n0\r\nX-Trailer: t\r\n\r\n'
    )
    server.replies.extend(
        [
            (chunked, False),
            (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}", False),
            (b"HTTP/1.1 204 No Content\r\n\r\n", False),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", False),  # HEAD: the length, no body
            ok(),
        ]
    )
    pool = server.pool()
    assert call(pool) == (200, b'{"a":1}')
    assert call(pool, "POST", "/p", b"{}") == (201, b"{}")
    assert call(pool, "DELETE") == (204, b"")
    assert call(pool, "HEAD") == (200, b"")
    assert call(pool) == (200, b"{}")
    assert server.connections == 1  # every answer was framed exactly: the connection stayed usable


def test_an_answer_read_to_the_close_and_connection_close_are_not_reused(server: Scripted) -> None:
    server.replies.extend(
        [
            (b'HTTP/1.0 200 OK\r\n\r\n{"old":true}', True),
            ok(extra="Connection: close\r\n"),
            ok(),
        ]
    )
    pool = server.pool()
    assert call(pool) == (200, b'{"old":true}')
    assert call(pool) == (200, b"{}")
    assert call(pool) == (200, b"{}")
    assert server.connections == 3


def test_a_connection_the_server_closed_while_idle_is_noticed_before_use(server: Scripted) -> None:
    server.replies.extend([(ok()[0], True), ok()])  # answers, then hangs up: the pool keeps a dead socket
    pool = server.pool()
    assert call(pool) == (200, b"{}")
    threading.Event().wait(0.05)  # the FIN arrives
    assert call(pool, "POST", "/p", b"{}") == (200, b"{}")  # not sent into the dead socket
    assert server.connections == 2 and len(server.requests) == 2


def test_a_request_cut_off_after_sending_is_sent_again_only_when_idempotent(server: Scripted) -> None:
    server.replies.extend([ok(), HANG_UP, ok()])
    pool = server.pool()
    call(pool)
    assert call(pool, "PUT", "/x", b"{}") == (200, b"{}")  # hung up on: sent again on a new connection
    assert len(server.requests) == 3 and server.connections == 2

    server.replies.extend([HANG_UP])
    with pytest.raises(BadResponse):
        call(pool, "POST", "/p", b"{}")  # it may have been applied: the caller decides
    assert len(server.requests) == 4


def test_timeouts_and_unreachable_servers_raise_transport_errors(server: Scripted) -> None:
    server.replies.extend([(None, False)])  # reads the request, never answers
    with pytest.raises(TimeoutError):
        server.pool().request("GET", "/", {}, connect_timeout=1, read_timeout=0.2)
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(ConnectionRefusedError):
        call(ConnectionPool("http", "127.0.0.1", port, retries=1))
    with pytest.raises(ConnectionError, match="cannot reach the server"):
        call(ConnectionPool("http", "no-such-host.invalid", 80, retries=0))  # not a bare gaierror


@pytest.mark.parametrize(
    "answer",
    [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 2x0 OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n"],
)
def test_an_answer_that_is_not_http_is_refused(server: Scripted, answer: bytes) -> None:
    server.replies.extend([(answer, True)])
    with pytest.raises(BadResponse):
        call(server.pool())


def test_targets_are_percent_encoded_and_header_injection_refused(server: Scripted) -> None:
    server.replies.extend([ok()])
    pool = server.pool()
    call(pool, target="/api/v1/namespaces/a b/pods/é?labelSelector=x%3Dy")
    assert server.requests[0].startswith(b"GET /api/v1/namespaces/a%20b/pods/%C3%A9?labelSelector=x%3Dy HTTP/1.1")
    with pytest.raises(ValueError, match="invalid header"):
        pool.request("GET", "/", {"Authorization": "Bearer x\r\nX-Evil: 1"}, connect_timeout=1, read_timeout=1)


def test_an_answer_sent_before_the_body_was_read_is_not_lost() -> None:
    """A server that refuses a body it will not read (413) answers and closes early: the client
    still reads the answer though its send broke."""
    listener = socket.create_server(("127.0.0.1", 0))

    def refuse() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(1024)  # the start of the request only
            conn.sendall(b"HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
            conn.shutdown(socket.SHUT_WR)
            threading.Event().wait(0.2)  # unread data at close: the kernel resets the connection

    threading.Thread(target=refuse, daemon=True).start()
    pool = ConnectionPool("http", "127.0.0.1", listener.getsockname()[1])
    try:
        response = pool.request("POST", "/p", {}, b"x" * (64 << 20), connect_timeout=2, read_timeout=5)
    finally:
        pool.close()
        listener.close()
    assert (response.status, response.body) == (413, b"{}")
