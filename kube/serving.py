"""One HTTP server for a component's operational endpoints: `/metrics`, health, and its own paths.

Every Tessera process answers Prometheus and the kubelet's probes on one port, and some add paths
of their own (the scheduler's Koordinator diagnostics, the agent's fault injection of simulated
GPUs). They all bind, route, bound request bodies, survive a handler's bug and stop the same way,
so that code lives here once: the agent, the controller and the scheduler each build a `Server`
(docs/dev/kube.md shows how).

Health follows kube-apiserver's `/livez` and `/readyz`: a check returns "" when fine, else the
reason; the answer is `200 ok`, or `500` listing each failed check and `<path> check failed`;
`?verbose` lists every check. `/readyz` runs the liveness checks too, and `/healthz` is `/livez`'s
older name. Errors the server answers itself (404, 405, 413, a handler's bug as 500) are spelled
by the component's `error` function, so the scheduler keeps Koordinator's `{"message": ...}`.
Requests are served on short-lived daemon threads (a slow or silent client holds only its own,
for at most `TIMEOUT` seconds, never the component); access lines go to the V(5) log.

Who may ask, before any route is looked at (as kube's secure ports do):

- a plain-HTTP server refuses what a web page made a browser send (`kube.hostcheck`: a `Host`
  that is not one of its names, a cross-site `Origin`) with a 403;
- given `auth` (a `kube.delegation.Delegation`), every path but the health checks (`PUBLIC`,
  kube's `--authorization-always-allow-paths`) needs a caller the API server authenticates and
  allows the request: `get` on `/metrics`, `post` on `/health/clear`, `put` on
  `/debug/flags/v` — a non-resource URL and the lower-cased method, as RBAC spells them. No
  credentials: `system:anonymous`; a bad token: 401; not allowed: 403, with kube's message
  (`forbidden: User "system:anonymous" cannot post path "/health/clear"`); the API server not
  answering: 401 or 500, as kube. These answers are kube's `Status` objects, whatever the
  component's own error shape. The handler sees who asked (`Request.caller`).
"""

from __future__ import annotations

import json
import logging
import re
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Final
from urllib.parse import parse_qs, unquote, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from apis.errors import ConfigError
from kube.delegation import Caller, Delegation, DelegationFailed, Unauthenticated
from kube.hostcheck import HostPolicy
from kube.logs import V
from kube.servingtls import TLSServing

__all__ = [
    "JSON",
    "MAX_BODY",
    "PUBLIC",
    "TEXT",
    "TIMEOUT",
    "Check",
    "ErrorFormat",
    "Handler",
    "Request",
    "Response",
    "Route",
    "Server",
    "ServingSettings",
    "text_error",
]

log = logging.getLogger(__name__)

TEXT: Final = "text/plain; charset=utf-8"
JSON: Final = "application/json"
#: The largest request body accepted (bytes); larger ones are answered 413 unread. Operational
#: endpoints take a flag value at most, and a bound keeps a client from making us buffer more.
MAX_BODY: Final = 1024
#: Seconds a connection may take to send a request before it is dropped.
TIMEOUT: Final = 30.0
#: Paths anyone may read (the kubelet's probes carry no credentials): kube's
#: `--authorization-always-allow-paths` default.
PUBLIC: Final = frozenset({"/healthz", "/livez", "/readyz"})

#: A named health check: "" when fine, else why not. Quick, and called on a request thread.
Check = Callable[[], str]


@dataclass(frozen=True, slots=True)
class ServingSettings:
    """Where a component serves its `Server` (`/healthz`, `/readyz`, `/metrics`): the descheduler,
    the controller and the kube-controller-manager take it from `--listen` and
    `--listen-address-file` (`kube.servingflags`), each with its own default port."""

    #: Port 0: any free port, which `address_file` then names.
    host: str = "0.0.0.0"
    port: int = 0
    #: Write the bound HOST:PORT here once serving (how a parent process finds a port 0 choice).
    address_file: Path | None = None
    #: HTTPS (`--tls-cert-file`/`--tls-self-signed`); plain HTTP by default.
    tls: TLSServing = field(default_factory=TLSServing)

    def validate(self) -> None:
        """Raises ConfigError for a port no socket can have."""
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--listen port {self.port}: must be in 0..65535")


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    #: The path, without the query.
    path: str
    #: The route's `:name` segments, decoded.
    params: Mapping[str, str] = field(default_factory=dict)
    #: The query, as `urllib.parse.parse_qs` reads it, blank values kept (`?verbose` is {"verbose": [""]}).
    query: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: Header names in lower case.
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    #: Who asked, as the API server named them (None: the server authenticates nobody).
    caller: Caller | None = None


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = TEXT

    @classmethod
    def text(cls, text: str, status: int = 200) -> Response:
        """`text` and a newline, as plain text."""
        return cls(status, text.encode() + b"\n", TEXT)

    @classmethod
    def json(cls, doc: object, status: int = 200, *, pretty: bool = False) -> Response:
        """`doc` as JSON and a newline; `pretty`: indented, keys sorted (for people reading curl)."""
        text = json.dumps(doc, indent=2, sort_keys=True) if pretty else json.dumps(doc)
        return cls(status, text.encode() + b"\n", JSON)


#: A route's handler. A Response says how it went (4xx included); an exception is a bug (500).
Handler = Callable[[Request], Response]
#: How a component spells an error the server answers itself: (status, message) -> Response.
ErrorFormat = Callable[[int, str], Response]


def text_error(status: int, message: str) -> Response:
    """The default error: the message as plain text."""
    return Response.text(message, status)


_REASONS: Final = {401: "Unauthorized", 403: "Forbidden", 500: "InternalError"}


def status_error(status: int, message: str) -> Response:
    """kube's `Status` object, as kube's secure ports answer a refused request."""
    doc = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": _REASONS.get(status, ""),
        "details": {},
        "code": status,
    }
    return Response.json(doc, status)


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    #: An absolute path; a `:name` segment matches any one segment, given as `params["name"]`. A
    #: trailing slash in a request is ignored.
    path: str
    handler: Handler


class Server:
    """The operational HTTP server of one component. Thread-safe; start, stop, start again."""

    def __init__(
        self,
        name: str,
        *,
        host: str,
        port: int,
        registry: CollectorRegistry,
        liveness: Mapping[str, Check] | None = None,
        readiness: Mapping[str, Check] | None = None,
        routes: Iterable[Route] = (),
        error: ErrorFormat = text_error,
        tls: ssl.SSLContext | Callable[[], ssl.SSLContext] | None = None,
        max_body: int = MAX_BODY,
        auth: Delegation | None = None,
        hosts: HostPolicy | None = None,
    ) -> None:
        """`name` appears in logs, the thread's name and errors. Raises ValueError when two routes
        have the same method and path (a component's route may not shadow a built-in one).

        `tls` serves HTTPS (an admission webhook): a context, or a function asked for one per
        connection (so a renewed certificate is served without a restart); the handshake happens
        on the request's thread,
        so a client that never completes it holds only that thread. `max_body` raises the body
        limit for endpoints that take objects (an AdmissionReview).

        `auth`: authenticate and authorize every request but `PUBLIC` through the API server
        (see the module docstring); None serves anyone (tests, benchmarks, an admission webhook,
        which the API server calls). `hosts`: the names a plain-HTTP server answers to besides IP
        addresses, localhost and Service names (default: this machine's host name); ignored
        with `tls`."""
        self.name = name
        self.tls = tls
        self.max_body = max_body
        self.auth = auth
        self.hosts = None if tls is not None else (hosts or HostPolicy())
        self._host = host
        self._port = port
        self._registry = registry
        #: How this server spells the errors it answers itself.
        self.error = error
        live = dict(liveness or {})
        builtin = [
            Route("GET", "/metrics", self._metrics),
            Route("GET", "/healthz", _health("healthz", live)),
            Route("GET", "/livez", _health("livez", live)),
            Route("GET", "/readyz", _health("readyz", {**live, **(readiness or {})})),
        ]
        self._routes: list[tuple[Route, re.Pattern[str]]] = []
        for route in [*builtin, *routes]:
            if any((r.method, r.path) == (route.method, route.path) for r, _ in self._routes):
                raise ValueError(f"{name}: route {route.method} {route.path} given twice")
            self._routes.append((route, _pattern(route.path)))
        self._lock = threading.Lock()
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def routes(self) -> tuple[Route, ...]:
        """Every route served, the built-in ones first."""
        return tuple(route for route, _ in self._routes)

    @property
    def port(self) -> int:
        """The bound port while serving (the real one when asked for port 0), else the one asked for."""
        server = self._server
        return server.server_address[1] if server is not None else self._port

    @property
    def address(self) -> str:
        """`HOST:PORT` (`[HOST]:PORT` for IPv6), with the bound port while serving."""
        return f"[{self._host}]:{self.port}" if ":" in self._host else f"{self._host}:{self.port}"

    def start(self) -> None:
        """Bind and serve on a daemon thread; returns once bound. Does nothing while serving.

        Raises ConfigError (from the OSError) when the address cannot be bound.
        """
        with self._lock:
            if self._server is not None:
                return
            try:
                server = _HTTPServer(self, (self._host, self._port))
            except OSError as e:
                raise ConfigError(f"{self.name}: cannot listen on {self.address}: {e.strerror or e}") from e
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.1}, name=self.name, daemon=True
            )
            self._server, self._thread = server, thread
            thread.start()
        log.info(
            "Serving HTTP",
            extra={"server": self.name, "address": self.address, "paths": ",".join(_paths(self.routes))},
        )

    def stop(self) -> None:
        """Stop accepting, close the socket and wait (5 s at most) for the serving thread. Idempotent.
        Requests in flight finish on their own threads."""
        with self._lock:
            server, self._server = self._server, None
            thread, self._thread = self._thread, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(5)

    def dispatch(
        self, method: str, target: str, body: bytes = b"", *, headers: Mapping[str, str] | None = None
    ) -> Response:
        """Answer one request, as if it came over the socket (tests call it directly).

        `target` is the path with its query. This is the loop boundary: a handler that raises is
        logged with its stack and answered 500; the server goes on serving.
        """
        url = urlsplit(target)
        path = url.path or "/"
        lower = {k.lower(): v for k, v in (headers or {}).items()}
        if self.hosts is not None and (why := self.hosts.refusal(method, lower)) is not None:
            log.log(V(2), "Refused a request", extra={"server": self.name, "path": path, "reason": why})
            return status_error(403, f"forbidden: {why}")
        caller = None
        if self.auth is not None and path not in PUBLIC:
            refused, caller = self._authorize(method, path, lower)
            if refused is not None:
                return refused
        allowed: set[str] = set()
        for route, pattern in self._routes:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if route.method != method:
                allowed.add(route.method)
                continue
            request = Request(
                method,
                path,
                params={k: unquote(v) for k, v in match.groupdict().items()},
                query=parse_qs(url.query, keep_blank_values=True),
                headers=lower,
                body=body,
                caller=caller,
            )
            try:
                return route.handler(request)
            except Exception as e:  # the loop boundary: log the bug, answer, keep serving
                log.exception("HTTP handler failed", extra={"server": self.name, "method": method, "path": path})
                return self.error(500, f"{type(e).__name__}: {e}")
        if allowed:
            return self.error(405, f"method {method} not allowed on {path}; use {', '.join(sorted(allowed))}")
        return self.error(404, f"no such path: {path}; served here: {', '.join(_paths(self.routes))}")

    def _authorize(self, method: str, path: str, headers: Mapping[str, str]) -> tuple[Response | None, Caller | None]:
        """(a refusal, None) or (None, the caller), asking the API server as kube's secure ports do."""
        assert self.auth is not None
        try:
            caller = self.auth.authenticate(headers.get("authorization", ""))
        except Unauthenticated as e:
            log.log(V(4), "Unauthenticated request", extra={"server": self.name, "path": path, "reason": str(e)})
            return status_error(401, "Unauthorized"), None
        except DelegationFailed as e:
            log.warning("Cannot authenticate a request", extra={"server": self.name, "path": path, "error": str(e)})
            return status_error(401, "Unauthorized"), None
        verb = method.lower()
        try:
            decision = self.auth.authorize(caller, verb, path)
        except DelegationFailed as e:
            log.warning("Cannot authorize a request", extra={"server": self.name, "path": path, "error": str(e)})
            return status_error(500, f"Internal Server Error: {path!r}: {e}"), None
        if not decision.allowed:
            message = f'forbidden: User "{caller.name}" cannot {verb} path "{path}"'
            if decision.reason:
                message += f": {decision.reason}"
            log.log(V(2), "Forbidden", extra={"server": self.name, "user": caller.name, "verb": verb, "path": path})
            return status_error(403, message), None
        return None, caller

    def _metrics(self, request: Request) -> Response:
        """The registry, in the format the scraper asks for (Prometheus text unless it accepts OpenMetrics)."""
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(200, encode(self._registry), content_type)


def _health(name: str, checks: Mapping[str, Check]) -> Handler:
    """The handler of `/<name>` over `checks`, answering as kube-apiserver does."""

    def handle(request: Request) -> Response:
        results = [(check, _run(check, run)) for check, run in checks.items()]
        failed = any(reason for _, reason in results)
        verbose = "verbose" in request.query
        if not failed and not verbose:
            return Response.text("ok")
        lines = [f"[-]{check} failed: {reason}" if reason else f"[+]{check} ok" for check, reason in results]
        shown = lines if verbose else [line for line in lines if line.startswith("[-]")]
        return Response.text(
            "\n".join([*shown, f"{name} check {'failed' if failed else 'passed'}"]), 500 if failed else 200
        )

    return handle


def _run(name: str, check: Check) -> str:
    try:
        return check()
    except Exception as e:  # a broken check reports failure instead of breaking the endpoint
        log.exception("Health check raised", extra={"check": name})
        return f"{type(e).__name__}: {e}"


def _pattern(path: str) -> re.Pattern[str]:
    segments = [
        f"(?P<{segment[1:]}>[^/]+)" if segment.startswith(":") else re.escape(segment) for segment in path.split("/")
    ]
    return re.compile("/".join(segments).rstrip("/") + "/?")


def _paths(routes: Iterable[Route]) -> list[str]:
    return sorted({route.path for route in routes})


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: Server, address: tuple[str, int]) -> None:
        self.owner = owner
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _RequestHandler)

    def server_bind(self) -> None:
        # HTTPServer's would look up our host name (socket.getfqdn), which may wait on DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])

    def get_request(self) -> tuple[socket.socket, object]:
        sock, address = super().get_request()
        # Headers and body are separate writes: without this, Nagle's algorithm holds the body
        # until the client's delayed ACK of the headers (40 ms on Linux) on every kept-alive request.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        tls = self.owner.tls
        if tls is None:
            return sock, address
        context = tls if isinstance(tls, ssl.SSLContext) else tls()
        return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def finish_request(self, request: object, client_address: object) -> None:
        if isinstance(request, ssl.SSLSocket):  # on the request's own thread (ThreadingMixIn)
            request.settimeout(TIMEOUT)
            request.do_handshake()
        super().finish_request(request, client_address)  # type: ignore[arg-type]

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that went away mid-answer (the base class would print a traceback to stderr).
        log.log(V(4), "HTTP connection failed", exc_info=True, extra={"server": self.owner.name})


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = TIMEOUT
    server: _HTTPServer

    def _serve(self) -> None:
        owner = self.server.owner
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            response = owner.error(400, f"bad Content-Length {self.headers.get('Content-Length')!r}")
            self.close_connection = True
        elif length > owner.max_body:
            response = owner.error(413, f"request body over {owner.max_body} bytes")
            self.close_connection = True  # the body is left unread
        else:
            body = self.rfile.read(length) if length else b""
            response = owner.dispatch(self.command, self.path, body, headers=dict(self.headers.items()))
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        self.wfile.write(response.body)

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _serve

    def log_message(self, format: str, *args: object) -> None:  # `format`: the base class's name
        log.log(
            V(5),
            "HTTP request",
            extra={"server": self.server.owner.name, "client": self.client_address[0], "line": format % args},
        )
