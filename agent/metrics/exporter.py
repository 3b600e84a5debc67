"""Serves a Prometheus registry on `/metrics` over HTTP, with a start and a stop.

The agent process hosts one; tests start one on port 0 and read `port`. The agent adds its other
small endpoints (`/healthz`, and the fault injection of simulated devices) as extra WSGI routes,
so one port serves them all; other paths answer 404.
Requests are served on short-lived threads (prometheus_client renders the registry per request);
access lines go to the debug log, not to stderr.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

__all__ = ["MetricsExporter", "WSGIApp"]

log = logging.getLogger(__name__)

_StartResponse = Callable[..., Any]
#: A WSGI application, the shape of an extra route.
WSGIApp = Callable[[dict[str, Any], _StartResponse], Iterable[bytes]]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # `format`: the base class's name
        log.debug("Metrics request", extra={"client": self.client_address[0], "line": format % args})


class MetricsExporter:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        host: str = "0.0.0.0",
        port: int = 9316,
        routes: Mapping[str, WSGIApp] | None = None,
    ) -> None:
        """`routes` maps further exact paths (`/healthz`) to WSGI applications."""
        self._routes: dict[str, WSGIApp] = {"/metrics": make_wsgi_app(registry), **(routes or {})}
        self._host = host
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the real one when started with port 0)."""
        return self._server.server_port if self._server is not None else self._port

    def start(self) -> None:
        """Bind and serve in a daemon thread. Raises OSError when the port cannot be bound."""
        if self._server is not None:
            raise RuntimeError("metrics exporter already started")
        self._server = make_server(
            self._host, self._port, self._route, server_class=_Server, handler_class=_QuietHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()
        log.info("Serving metrics", extra={"address": f"{self._host}:{self.port}", "path": "/metrics"})

    def stop(self) -> None:
        """Stop serving and close the socket. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def _route(self, environ: dict[str, Any], start_response: _StartResponse) -> Iterable[bytes]:
        app = self._routes.get(environ.get("PATH_INFO", ""))
        if app is None:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [f"not found; served here: {', '.join(sorted(self._routes))}\n".encode()]
        return app(environ, start_response)
