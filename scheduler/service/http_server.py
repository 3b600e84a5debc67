"""Diagnostics over HTTP, on Koordinator's paths, plus `/metrics`, `/healthz` and `/readyz`.

    GET  /apis/v1/__services__                                 every path served here, by method
    GET  /apis/v1/nodes/:nodeName                              what the scheduler knows of a node
    GET  /apis/v1/plugins/DeviceShare/nodeDeviceSummaries      Koordinator's NodeDeviceSummary, all nodes
    GET  /apis/v1/plugins/DeviceShare/nodeDeviceSummaries/:name
    PUT  /debug/flags/s   (body N)                             log the top-N score table per pod; 0: off
    PUT  /debug/flags/v   (body N)                             log verbosity, as kube-scheduler
    GET  /debug/scores                                         the latest score tables (markdown)
    GET  /metrics                                              Prometheus
    GET  /healthz, /readyz                                     alive; informers synced

JSON errors are Koordinator's `{"message": "..."}`. Requests are served on short-lived threads
(a slow client never blocks the scheduler); every handler is a loop boundary that logs a bug
and answers 500. `/debug/flags/*` also accept POST, as Koordinator's proposal spells them.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from apis.errors import ConfigError
from kube.logs import V
from scheduler.service.inspector import Inspector
from scheduler.service.scoretable import DebugFlags

__all__ = ["DiagnosticsServer", "Health"]

log = logging.getLogger(__name__)

_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"
_MAX_BODY = 1024


@dataclass(frozen=True, slots=True)
class Health:
    """What `/healthz` and `/readyz` ask: "" when fine, else why not."""

    live: Callable[[], str]
    ready: Callable[[], str]


@dataclass(frozen=True, slots=True)
class _Response:
    status: int
    body: bytes
    content_type: str = _JSON

    @classmethod
    def json(cls, doc: object, status: int = 200) -> _Response:
        return cls(status, json.dumps(doc, indent=2, sort_keys=True).encode() + b"\n")

    @classmethod
    def text(cls, text: str, status: int = 200) -> _Response:
        return cls(status, text.encode() + b"\n", _TEXT)

    @classmethod
    def error(cls, status: int, message: str) -> _Response:
        return cls.json({"message": message}, status)


_Handler = Callable[[Mapping[str, str], bytes], _Response]


@dataclass(frozen=True, slots=True)
class _Route:
    method: str
    path: str  # Koordinator's spelling, with :params
    pattern: re.Pattern[str]
    handler: _Handler


class DiagnosticsServer:
    def __init__(
        self,
        address: str,
        *,
        inspector: Inspector,
        debug: DebugFlags,
        registry: CollectorRegistry,
        health: Health,
    ) -> None:
        host, _, port = address.rpartition(":")
        self._host = host.strip("[]")
        self._port = int(port)
        self._inspector = inspector
        self._debug = debug
        self._registry = registry
        self._health = health
        self._routes: list[_Route] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._add("GET", "/apis/v1/__services__", self._services)
        self._add("GET", "/apis/v1/nodes/:nodeName", self._node)
        self._add("GET", "/apis/v1/plugins/DeviceShare/nodeDeviceSummaries", self._summaries)
        self._add("GET", "/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/:name", self._summary)
        for method in ("PUT", "POST"):
            self._add(method, "/debug/flags/s", self._set_top_n)
            self._add(method, "/debug/flags/v", self._set_verbosity)
        self._add("GET", "/debug/scores", self._scores)
        self._add("GET", "/metrics", self._metrics)
        self._add("GET", "/healthz", lambda _p, _b: _check(self._health.live()))
        self._add("GET", "/readyz", lambda _p, _b: _check(self._health.ready()))

    @property
    def port(self) -> int:
        """The bound port (the real one when started with port 0)."""
        return self._server.server_port if self._server is not None else self._port

    @property
    def address(self) -> str:
        """The bound `HOST:PORT`."""
        return f"[{self._host}]:{self.port}" if ":" in self._host else f"{self._host}:{self.port}"

    def start(self) -> None:
        """Bind and serve in a thread. Raises ConfigError when the address cannot be bound."""
        if self._server is not None:
            return
        try:
            server = ThreadingHTTPServer((self._host, self._port), self._handler_class())
        except OSError as e:
            raise ConfigError(f"diagnostics HTTP: cannot listen on {self._host}:{self._port}: {e}") from e
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="scheduler-http", daemon=True
        )
        self._thread.start()
        log.info("Serving diagnostics", extra={"address": self.address})

    def stop(self) -> None:
        """Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    # --- routing ------------------------------------------------------------------------------------
    def _add(self, method: str, path: str, handler: _Handler) -> None:
        regex = "^" + re.sub(r":(\w+)", r"(?P<\1>[^/]+)", path) + "/?$"
        self._routes.append(_Route(method, path, re.compile(regex), handler))

    def dispatch(self, method: str, path: str, body: bytes) -> _Response:
        """Answer one request (a loop boundary: a bug becomes a logged 500)."""
        path = path.split("?", 1)[0]
        allowed = False
        for route in self._routes:
            match = route.pattern.match(path)
            if match is None:
                continue
            if route.method != method:
                allowed = True
                continue
            try:
                return route.handler(match.groupdict(), body)
            except Exception as e:
                log.exception("Diagnostics request failed", extra={"path": path})
                return _Response.error(500, f"{type(e).__name__}: {e}")
        if allowed:
            return _Response.error(405, f"method {method} not allowed on {path}")
        return _Response.error(404, f"no such path: {path} (see /apis/v1/__services__)")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        dispatch = self.dispatch

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length > _MAX_BODY:
                    response = _Response.error(413, f"request body over {_MAX_BODY} bytes")
                    self.close_connection = True
                else:
                    response = dispatch(self.command, self.path, self.rfile.read(length) if length else b"")
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(response.body)))
                self.end_headers()
                self.wfile.write(response.body)

            do_GET = do_PUT = do_POST = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:  # `format`: the base class's name
                log.log(V(5), "Diagnostics request", extra={"client": self.client_address[0], "line": format % args})

        return Handler

    # --- handlers -----------------------------------------------------------------------------------
    def _services(self, _params: Mapping[str, str], _body: bytes) -> _Response:
        by_method: dict[str, list[str]] = {}
        for route in self._routes:
            by_method.setdefault(route.method, []).append(route.path)
        return _Response.json({method: sorted(paths) for method, paths in sorted(by_method.items())})

    def _node(self, params: Mapping[str, str], _body: bytes) -> _Response:
        info = self._inspector.node_info(params["nodeName"])
        if info is None:
            return _Response.error(404, f"cannot find node {params['nodeName']}")
        return _Response.json(info)

    def _summaries(self, _params: Mapping[str, str], _body: bytes) -> _Response:
        return _Response.json(self._inspector.device_summaries())

    def _summary(self, params: Mapping[str, str], _body: bytes) -> _Response:
        name = params["name"]
        found = self._inspector.device_summaries(name)
        if not found.get(name, {}).get("deviceTotal"):
            return _Response.error(404, f"cannot find node {name}")
        return _Response.json(found[name])

    def _set_top_n(self, _params: Mapping[str, str], body: bytes) -> _Response:
        value = _int_body(body)
        if value is None or value < 0:
            return _Response.error(400, f"expected a number of nodes >= 0, got {body[:40]!r}")
        self._debug.set_top_n_scores(value)
        log.info("Debug flag changed", extra={"flag": "debugTopNScores", "value": value})
        return _Response.text(f"successfully set debugTopNScores to {value}")

    def _set_verbosity(self, _params: Mapping[str, str], body: bytes) -> _Response:
        value = _int_body(body)
        if value is None or not 0 <= value <= 10:
            return _Response.error(400, f"expected a verbosity in 0..10, got {body[:40]!r}")
        logging.getLogger().setLevel(V(value))
        log.info("Debug flag changed", extra={"flag": "verbosity", "value": value})
        return _Response.text(f"successfully set klog.logging.verbosity to {value}")

    def _scores(self, _params: Mapping[str, str], _body: bytes) -> _Response:
        tables = self._debug.tables()
        if not tables:
            return _Response.text("no score tables yet; enable them with PUT /debug/flags/s (body: N)")
        return _Response(200, ("\n\n".join(tables) + "\n").encode(), "text/markdown; charset=utf-8")

    def _metrics(self, _params: Mapping[str, str], _body: bytes) -> _Response:
        return _Response(200, generate_latest(self._registry), CONTENT_TYPE_LATEST)


def _check(problem: str) -> _Response:
    return _Response.text(problem, 503) if problem else _Response.text("ok")


def _int_body(body: bytes) -> int | None:
    try:
        return int(body.decode().strip())
    except (UnicodeDecodeError, ValueError):
        return None
