"""A lean HTTP/1.1 client for the API server's request/response calls: `ConnectionPool`.

`kube.client.Client` sends every call that answers with a whole document (get, list, create,
patch, delete; not watches) through here. urllib3 over http.client, which parses each response's
headers with the `email` package, spent about 250 µs of CPU per request on this machine; the
scheduler makes two requests per pod it binds (the Binding, the `Scheduled` Event), so that was a
quarter of its CPU in `tessera bench scheduler-e2e`. This does only what these calls need — kept-
alive connections (TLS through the client's `SSLContext`), the request written with one
`sendall`, a response body framed by Content-Length, chunked or read to the close — in about a
fifth of that. Streams (watches, `Client.open`) and servers behind a proxy stay on urllib3.

Retries follow urllib3's rules: a kept-alive connection the server closed while it sat idle is
noticed before it is used (a zero-timeout poll), not by sending into it; a connection that cannot
be made is tried `retries` more times (a certificate that does not verify, never); a request that
broke after it was sent goes out again only when its method is idempotent and it went out on a
reused connection (a POST may have been applied: the caller decides). Failures raise OSError
subclasses — ConnectionError (any other OSError is raised as one), TimeoutError, ssl.SSLError —
which `kube.errors.translated` turns into `Unreachable`.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import ssl
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, NoReturn
from urllib.parse import quote

__all__ = ["BadResponse", "ConnectionPool", "Response"]

#: Methods whose request may be sent twice (RFC 9110 §9.2.2).
IDEMPOTENT: Final = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
#: A response's header block longer than this is refused (http.client allows 100 headers of 64 KiB).
MAX_HEADER_BYTES: Final = 256 * 1024
_RECV: Final = 64 * 1024  # under malloc's mmap threshold: a recv buffer is not an mmap each time
#: Characters a request target may carry as they are; anything else is percent-encoded, as urllib3 does.
_TARGET_OK: Final = re.compile(r"[A-Za-z0-9\-._~/?&=%:@!$'()*+,;\[\]]*")
_TARGET_SAFE: Final = "/?&=%:@!$'()*+,;[]~"


class BadResponse(ConnectionError):
    """The server's answer is not HTTP/1.x, or it closed the connection in the middle of one."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    reason: str
    #: Names in lower case; a repeated header's values joined with ", ".
    headers: Mapping[str, str]
    body: bytes


class _Connection:
    """One socket and what was read from it past the last response."""

    __slots__ = ("buffer", "received", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        #: Whether any byte of the current response arrived (a request that got nothing back
        #: on a reused connection most likely met a connection the server was closing).
        self.received = False

    def dropped(self) -> bool:
        """Whether the server closed the idle connection (or sent something unasked)."""
        if self.buffer:
            return True
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return True
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        return bool(poller.poll(0))

    def fill(self, deadline: float | None, read_timeout: float) -> None:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out reading the response")
            self.sock.settimeout(min(left, read_timeout))
        data = self.sock.recv(_RECV)
        if not data:
            raise BadResponse("the server closed the connection before the response was complete")
        self.received = True
        self.buffer += data

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class ConnectionPool:
    """Kept-alive connections to one server. Thread-safe: each request takes a connection of its
    own (deque pops and appends are atomic) and gives it back when its response was read whole."""

    def __init__(
        self,
        scheme: str,
        host: str,
        port: int | None,
        *,
        context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        maxsize: int = 64,
        retries: int = 3,
    ) -> None:
        """`context` for https (it verifies the name when its `check_hostname` is set);
        `server_hostname` is the name sent and verified (default `host`)."""
        if scheme not in ("http", "https"):
            raise ValueError(f"unsupported scheme {scheme!r}")
        self._https = scheme == "https"
        if self._https and context is None:
            raise ValueError("https needs an SSL context")
        self._address = (host.strip("[]"), port or (443 if self._https else 80))
        default_port = port is None or port == (443 if self._https else 80)
        bracketed = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
        self._host_header = bracketed if default_port else f"{bracketed}:{port}"
        self._context = context
        self._server_hostname = server_hostname or host.strip("[]")
        self._maxsize = maxsize
        self._retries = retries
        self._idle: deque[_Connection] = deque()

    def request(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
        *,
        connect_timeout: float,
        read_timeout: float,
        total_timeout: float | None = None,
    ) -> Response:
        """Send one request and read its whole response. `read_timeout` bounds each wait for
        data; `total_timeout`, when given, the whole request."""
        deadline = None if total_timeout is None else time.monotonic() + total_timeout
        message = self._message(method, target, headers, body)
        connect_tries = self._retries + 1
        resent = False
        while True:
            conn = self._checkout()
            reused = conn is not None
            if conn is None:
                try:
                    conn = self._connect(connect_timeout)
                except ssl.SSLCertVerificationError:
                    raise
                except OSError as e:
                    connect_tries -= 1
                    if connect_tries <= 0:
                        _raise_transport_error(e)
                    continue
            try:
                conn.sock.settimeout(read_timeout)
                cut_off = False
                try:
                    conn.sock.sendall(message)
                except (BrokenPipeError, ConnectionResetError):
                    # The server may have answered before reading the whole body (a 413) and
                    # closed: read that answer, as urllib3 does (if there is none, reading fails).
                    cut_off = True
                response, keep = self._read(conn, method, deadline, read_timeout)
                keep = keep and not cut_off
            except OSError as e:
                conn.close()
                if reused and not conn.received and not resent and method in IDEMPOTENT:
                    resent = True
                    continue
                _raise_transport_error(e)
            if keep and len(self._idle) < self._maxsize:
                self._idle.append(conn)
            else:
                conn.close()
            return response

    def close(self) -> None:
        """Close the idle connections (those in use close when their request ends)."""
        while self._idle:
            try:
                self._idle.pop().close()
            except IndexError:
                break

    # --- internals ----------------------------------------------------------------------------------
    def _message(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
        if not _TARGET_OK.fullmatch(target):
            target = quote(target, safe=_TARGET_SAFE)
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header}"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
                raise ValueError(f"invalid header {name!r}")
            lines.append(f"{name}: {value}")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head + body if body else head

    def _checkout(self) -> _Connection | None:
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                return None
            try:
                if not conn.dropped():
                    conn.received = False
                    return conn
            except (OSError, ValueError):  # closed meanwhile
                pass
            conn.close()

    def _connect(self, timeout: float) -> _Connection:
        sock = socket.create_connection(self._address, timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._context is not None:
                sock = self._context.wrap_socket(sock, server_hostname=self._server_hostname)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock)

    def _read(
        self, conn: _Connection, method: str, deadline: float | None, read_timeout: float
    ) -> tuple[Response, bool]:
        """The response (interim 1xx ones skipped) and whether the connection can be reused."""
        while True:
            version, status, reason, headers = _read_head(conn, deadline, read_timeout)
            if not 100 <= status < 200 or status == 101:
                break
        connection = headers.get("connection", "").lower()
        keep = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = _read_chunked(conn, deadline, read_timeout)
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"].split(",")[0])
            except ValueError:
                raise BadResponse(f"bad Content-Length {headers['content-length']!r}") from None
            if length < 0:
                raise BadResponse(f"bad Content-Length {length}")
            body = _take(conn, length, deadline, read_timeout)
        else:  # delimited by the close
            while True:
                try:
                    conn.fill(deadline, read_timeout)
                except BadResponse:
                    break
            body, keep = bytes(conn.buffer), False
            conn.buffer.clear()
        return Response(status, reason, headers, body), keep


def _raise_transport_error(error: OSError) -> NoReturn:
    """Raise `error`, or a ConnectionError saying it when it is an OSError of another kind (a name
    that does not resolve, an unreachable network), so that callers see one family."""
    if isinstance(error, ConnectionError | TimeoutError | ssl.SSLError):
        raise error
    raise ConnectionError(f"cannot reach the server: {error}") from error


def _read_head(conn: _Connection, deadline: float | None, read_timeout: float) -> tuple[str, int, str, dict[str, str]]:
    buffer = conn.buffer
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        if len(buffer) > MAX_HEADER_BYTES:
            raise BadResponse("the response's header is too long")
        conn.fill(deadline, read_timeout)
    lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    del buffer[: end + 4]
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or not code.isdigit() or len(code) != 3:
        raise BadResponse(f"not an HTTP/1.x status line: {lines[0][:100]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise BadResponse(f"bad header line: {line[:100]!r}")
        key, value = name.strip().lower(), value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return version, int(code), reason, headers


def _take(conn: _Connection, length: int, deadline: float | None, read_timeout: float) -> bytes:
    while len(conn.buffer) < length:
        conn.fill(deadline, read_timeout)
    if len(conn.buffer) == length:  # the usual case: the whole rest is the body, one copy
        data = bytes(conn.buffer)
        conn.buffer.clear()
        return data
    with memoryview(conn.buffer) as view:
        data = bytes(view[:length])
    del conn.buffer[:length]
    return data


def _line(conn: _Connection, deadline: float | None, read_timeout: float) -> bytes:
    while (end := conn.buffer.find(b"\r\n")) < 0:
        if len(conn.buffer) > MAX_HEADER_BYTES:
            raise BadResponse("a chunk's size line is too long")
        conn.fill(deadline, read_timeout)
    line = bytes(conn.buffer[:end])
    del conn.buffer[: end + 2]
    return line


def _read_chunked(conn: _Connection, deadline: float | None, read_timeout: float) -> bytes:
    parts: list[bytes] = []
    while True:
        size_text = _line(conn, deadline, read_timeout).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadResponse(f"bad chunk size {size_text[:20]!r}") from None
        if size == 0:
            while _line(conn, deadline, read_timeout):  # trailers, up to the empty line
                pass
            return b"".join(parts)
        parts.append(_take(conn, size, deadline, read_timeout))
        if _take(conn, 2, deadline, read_timeout) != b"\r\n":
            raise BadResponse("a chunk does not end with CRLF")
