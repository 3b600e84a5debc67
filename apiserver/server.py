"""Assembling and running the embedded API server: storage, registry, HTTP, kubeconfig.

`serve(settings)` runs it on the current event loop until asked to stop; `run(settings)` is the
blocking entry point `tessera apiserver` calls. The listening socket is bound before anything
else, so a port of 0 works (the chosen port is in the kubeconfig written at start-up), and a
server that cannot bind fails before touching its data directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import secrets
import signal
import socket
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from apis.errors import ConfigError
from apiserver import dra, pki, workloads
from apiserver.admission import USER, Admission, WebhookConfigurationStrategy
from apiserver.authz import bootstrap
from apiserver.authz.authorizer import Authorizer, Chain
from apiserver.authz.escalation import EscalationGuard
from apiserver.authz.gate import Gate
from apiserver.authz.identity import TokenAuthenticator, User
from apiserver.authz.node import NodeAuthorizer
from apiserver.authz.policy import RegistryGraph, RegistryPolicy
from apiserver.authz.rbac import AlwaysAllow, PolicyVersion, RBACAuthorizer
from apiserver.authz.strategy import rbac_strategies
from apiserver.bodies import BodyDecoder
from apiserver.catalog import Catalog
from apiserver.crds import CRDStrategy
from apiserver.discovery import Discovery
from apiserver.flowcontrol import FlowControl, FlowSettings
from apiserver.handlers import Handlers, WatchSettings, status_response
from apiserver.metrics import APIServerMetrics
from apiserver.pods import PodStrategy
from apiserver.registry import CRDS, Registry
from apiserver.schema.strategy import Strategies
from apiserver.storage import Storage
from apiserver.strategy import NamespaceStrategy, Strategy
from apiserver.watch import WatchHub
from kube.kubeconfig import write_kubeconfig
from kube.logs import V

__all__ = ["APIServerSettings", "run", "serve"]

log = logging.getLogger(__name__)

WEBHOOK_CONFIGURATIONS = "validatingwebhookconfigurations.admissionregistration.k8s.io"


@dataclass(frozen=True, slots=True)
class APIServerSettings:
    host: str = "127.0.0.1"
    port: int = 6443
    #: Where objects are kept (SQLite); None keeps them in memory only.
    data_dir: Path | None = None
    #: Write a kubeconfig for clients here once listening.
    kubeconfig_out: Path | None = None
    #: Clients must send `Authorization: Bearer <token>` (over HTTPS); None serves plain HTTP, no auth.
    token: str | None = None
    #: More identities, in kube's `--token-auth-file` CSV format (`token,user,uid,"g1,g2"`); with a
    #: token, requests are authorized by RBAC (the `token` itself is cluster-admin).
    token_auth_file: Path | None = None
    #: Where the TLS CA and serving certificate live (default: DATA_DIR/pki, or a temporary directory).
    cert_dir: Path | None = None
    #: Events retained per resource for watches to resume from (older resume → 410 Gone).
    watch_window: int = 10_000
    watch: WatchSettings = field(default_factory=WatchSettings)
    max_body_bytes: int = 3 * 1024 * 1024
    max_object_bytes: int = 1536 * 1024
    #: A connection must send a complete request header within this long of opening (or of its
    #: previous response): kube's ReadHeaderTimeout (32 s); it is also the keep-alive idle timeout.
    request_header_timeout: float = 30.0
    #: How long a request's body may take to arrive.
    request_body_timeout: float = 60.0
    #: Open connections at most; more are closed as they arrive.
    max_connections: int = 1024
    #: The longest request line or header (kube's server takes 1 MiB of headers; a long
    #: labelSelector must reach the handlers to get a Status, not a plain-text 400).
    max_header_bytes: int = 256 * 1024
    flow: FlowSettings = field(default_factory=FlowSettings)

    def validate(self) -> None:
        if self.token is None and not _is_loopback(self.host):
            raise ConfigError(
                f"refusing to listen on {self.host} without a token: anyone who can reach it could change the "
                "cluster; pass --token-file or listen on a loopback address"
            )
        if self.token_auth_file is not None and self.token is None:
            raise ConfigError("--token-auth-file needs --token-file: identities are only checked over HTTPS")
        if self.watch_window < 100:
            raise ConfigError(f"watch window {self.watch_window} is too small (at least 100 events)")
        if self.request_header_timeout <= 0 or self.max_connections < 1:
            raise ConfigError("the request header timeout must be positive and at least one connection allowed")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _cert_dir(settings: APIServerSettings, stack: contextlib.ExitStack) -> Path:
    if settings.cert_dir is not None:
        return settings.cert_dir
    if settings.data_dir is not None:
        return settings.data_dir / "pki"
    return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tessera-pki-")))


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    return sock


def _gate(
    settings: APIServerSettings,
    registry: Registry,
    handlers: Handlers,
    *,
    guard: EscalationGuard,
    version: PolicyVersion,
    flow: FlowControl,
) -> Gate:
    """Authentication, then the Node authorizer and RBAC (with escalation checks; kube's
    `--authorization-mode=Node,RBAC`) with a token; without one, everyone is allowed everything.
    Either way, flow control shares the server between identities."""
    authenticator: TokenAuthenticator | None = None
    policy: Authorizer = AlwaysAllow()
    if settings.token is not None:
        authenticator = TokenAuthenticator.from_files(settings.token, settings.token_auth_file)
        rbac = RBACAuthorizer(RegistryPolicy(registry), version)
        guard.bind(rbac)
        policy = Chain([NodeAuthorizer(RegistryGraph(registry)), rbac])
    return Gate(
        authenticator,
        policy,
        handlers.handle,
        status_response,
        read_body=handlers.review_body,
        flow=flow,
        on_user=_admission_user,
    )


class _ConnectionCap:
    """The listening socket's protocol factory: aiohttp's handler for each connection while fewer
    than `limit` are open; a connection beyond that is closed as it is made. Counted from
    `connection_made` to `connection_lost`, which asyncio pairs (a TLS handshake that never
    completes calls neither, so it can never leave a count behind)."""

    def __init__(self, server: web.Server, limit: int) -> None:
        self._server = server
        self.limit = limit
        self.open = 0

    def __call__(self) -> asyncio.BaseProtocol:
        return _Counted(self, self._server)


class _Counted(asyncio.Protocol):
    """One connection: aiohttp's protocol once it is admitted, counted until it is lost."""

    def __init__(self, cap: _ConnectionCap, server: web.Server) -> None:
        self._cap = cap
        self._server = server
        self._inner: asyncio.Protocol | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._cap.open >= self._cap.limit:
            log.log(V(2), "Connection refused: too many open", extra={"limit": self._cap.limit})
            transport.close()
            return
        self._cap.open += 1
        self._inner = self._server()
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._inner is not None:
            self._cap.open -= 1
            self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()


def _admission_user(user: User) -> None:
    """This request's task only: admission (NodeRestriction, webhooks' userInfo) sees who asked."""
    USER.set(user)


async def serve(settings: APIServerSettings, stop: asyncio.Event) -> None:
    """Serve until `stop` is set (or storage fails, which also sets it)."""
    settings.validate()
    sock = _bind(settings.host, settings.port)
    host, port = sock.getsockname()[:2]
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    storage = Storage(settings.data_dir) if settings.data_dir is not None else None
    stack = contextlib.ExitStack()
    try:
        start_rv, rows = storage.load() if storage is not None else (0, iter(()))
        catalog = Catalog()
        hub = WatchHub(settings.watch_window, start_rv)
        metrics = APIServerMetrics()
        admission = Admission(catalog, metrics)
        guard = EscalationGuard()
        policy_version = PolicyVersion()
        builtin: dict[str, Strategy] = {
            "pods": PodStrategy(),
            "namespaces": NamespaceStrategy(),
            CRDS: CRDStrategy(catalog),
            WEBHOOK_CONFIGURATIONS: WebhookConfigurationStrategy(admission),
            **workloads.STRATEGIES,
            **dra.STRATEGIES,
            **rbac_strategies(guard, policy_version),
        }
        strategies = Strategies(catalog, builtin)
        failure: list[BaseException] = []

        def fatal(error: BaseException) -> None:
            failure.append(error)
            stop.set()

        registry = Registry(
            catalog,
            hub,
            storage,
            strategies,
            max_object_bytes=settings.max_object_bytes,
            on_fatal=fatal,
            admission=admission,
        )
        admission.bind(registry.peek)
        count = registry.load(rows)
        if storage is not None:
            storage.start()
        await registry.ensure_namespaces()
        await bootstrap.ensure_policy(registry)
        ready = False
        decoder = BodyDecoder()
        stack.callback(decoder.close)
        flow = FlowControl(settings.flow)
        handlers = Handlers(
            registry,
            catalog,
            Discovery(catalog, address),
            watch=settings.watch,
            ready=lambda: ready,
            metrics=metrics,
            decoder=decoder,
            body_timeout=settings.request_body_timeout,
            flow=flow,
        )
        app = web.Application(client_max_size=settings.max_body_bytes)
        gate = _gate(settings, registry, handlers, guard=guard, version=policy_version, flow=flow)
        app.router.add_route("*", "/{tail:.*}", gate)
        runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            keepalive_timeout=settings.request_header_timeout,
            max_line_size=settings.max_header_bytes,
            max_field_size=settings.max_header_bytes,
        )
        await runner.setup()
        cert = None
        if settings.token is not None:
            cert = pki.ensure_serving_cert(_cert_dir(settings, stack), host)
        assert runner.server is not None
        listener = await asyncio.get_running_loop().create_server(
            _ConnectionCap(runner.server, settings.max_connections),
            sock=sock,
            ssl=cert.context() if cert else None,
            ssl_handshake_timeout=settings.request_header_timeout if cert else None,
            backlog=128,
        )
        url = f"{'https' if cert else 'http'}://{address}"
        if settings.kubeconfig_out is not None:
            write_kubeconfig(settings.kubeconfig_out, url, token=settings.token, ca_pem=cert.ca_pem if cert else None)
        ready = True
        log.info(
            "Serving",
            extra={
                "url": url,
                "dataDir": str(settings.data_dir or "<memory>"),
                "objects": count,
                "resourceVersion": registry.rv,
                "auth": "token" if settings.token else "none",
            },
        )
        await stop.wait()
        ready = False
        log.info("Shutting down", extra={"url": url})
        handlers.close_watches()
        listener.close()
        await runner.cleanup()
        await admission.close()
        if failure:
            raise failure[0]
    finally:
        stack.close()
        sock.close()
        if storage is not None:
            storage.close()


def run(settings: APIServerSettings) -> int:
    """Run until SIGTERM/SIGINT; returns the process exit code."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(settings, stop)

    try:
        asyncio.run(main())
    except ConfigError as e:
        log.error("Cannot start", extra={"reason": str(e)})
        return 2
    except (OSError, sqlite3.Error):
        log.exception("Storage failed; stopping")
        return 1
    return 0
