"""The manager's HTTP side: `/healthz`, `/readyz` and `/metrics` on one address.

Kubernetes probes and Prometheus scrape these. Health and readiness are named checks answered
the way kube-apiserver answers them: `200 ok`, or `500` listing the failed checks (`?verbose`
lists every check). Liveness fails only when the process is wedged (a worker thread died), so a
kubelet restarts it; readiness fails until the caches have synced and while shutting down.
Requests are served on short-lived threads; access lines go to the V(5) log, not to stderr.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kube.logs import V

__all__ = ["Check", "Endpoints"]

log = logging.getLogger(__name__)

#: A named health or readiness check: True when fine. Must be quick and must not raise.
Check = Callable[[], bool]


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class Endpoints:
    def __init__(
        self,
        *,
        host: str,
        port: int,
        registry: CollectorRegistry,
        liveness: Mapping[str, Check],
        readiness: Mapping[str, Check],
    ) -> None:
        self._host = host
        self._port = port
        self._registry = registry
        self._checks = {"/healthz": dict(liveness), "/livez": dict(liveness), "/readyz": dict(readiness)}
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the real one when asked for port 0)."""
        return self._server.server_address[1] if self._server is not None else self._port

    def start(self) -> None:
        """Bind and serve in a daemon thread. Raises OSError when the address cannot be bound."""
        if self._server is not None:
            raise RuntimeError("endpoints already started")
        endpoints = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                endpoints._serve(self)

            def log_message(self, format: str, *args: Any) -> None:  # `format`: the base class's name
                log.log(V(5), "HTTP request", extra={"client": self.client_address[0], "line": format % args})

        self._server = _Server((self._host, self._port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="controller-http", daemon=True)
        self._thread.start()
        log.info(
            "Serving health and metrics",
            extra={"address": f"{self._host}:{self.port}", "paths": "/healthz,/readyz,/metrics"},
        )

    def stop(self) -> None:
        """Stop serving and close the socket. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        url = urlsplit(request.path)
        if url.path == "/metrics":
            self._reply(request, 200, generate_latest(self._registry), CONTENT_TYPE_LATEST)
            return
        checks = self._checks.get(url.path)
        if checks is None:
            self._reply(request, 404, b"not found: /healthz, /readyz, /metrics\n")
            return
        results = {name: _run(check) for name, check in checks.items()}
        healthy = all(results.values())
        verbose = "verbose" in url.query
        lines = [f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}" for name, ok in results.items()]
        if healthy:
            body = "\n".join([*lines, f"{url.path[1:]} check passed"]) if verbose else "ok"
        else:
            shown = lines if verbose else [line for line in lines if line.startswith("[-]")]
            body = "\n".join([*shown, f"{url.path[1:]} check failed"])
        self._reply(request, 200 if healthy else 500, (body + "\n").encode())

    @staticmethod
    def _reply(request: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str = "text/plain") -> None:
        request.send_response(status)
        request.send_header("Content-Type", content_type)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)


def _run(check: Check) -> bool:
    try:
        return bool(check())
    except Exception:  # a broken check reports failure instead of breaking the endpoint
        log.exception("Health check failed")
        return False
