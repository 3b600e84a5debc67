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
from apiserver import pki, workloads
from apiserver.admission import USER, Admission, WebhookConfigurationStrategy
from apiserver.authz import bootstrap
from apiserver.authz.gate import Gate
from apiserver.authz.identity import TokenAuthenticator, User
from apiserver.authz.policy import RegistryPolicy
from apiserver.authz.rbac import AlwaysAllow, RBACAuthorizer
from apiserver.authz.strategy import RBAC_STRATEGIES
from apiserver.catalog import Catalog
from apiserver.crds import CRDStrategy
from apiserver.discovery import Discovery
from apiserver.handlers import Handlers, WatchSettings, status_response
from apiserver.metrics import APIServerMetrics
from apiserver.pods import PodStrategy
from apiserver.registry import CRDS, Registry
from apiserver.schema.strategy import Strategies
from apiserver.storage import Storage
from apiserver.strategy import NamespaceStrategy, Strategy
from apiserver.watch import WatchHub
from kube.kubeconfig import write_kubeconfig

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


def _gate(settings: APIServerSettings, registry: Registry, handlers: Handlers) -> Gate:
    """Authentication and RBAC with a token; without one, everyone is allowed everything."""
    if settings.token is None:
        return Gate(None, AlwaysAllow(), handlers.handle, status_response, on_user=_admission_user)
    authenticator = TokenAuthenticator.from_files(settings.token, settings.token_auth_file)
    policy = RBACAuthorizer(RegistryPolicy(registry))
    return Gate(authenticator, policy, handlers.handle, status_response, on_user=_admission_user)


def _admission_user(user: User) -> None:
    """This request's task only: admission webhooks see who asked (AdmissionReview userInfo)."""
    USER.set({"username": user.name, "uid": user.uid, "groups": list(user.groups)})


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
        builtin: dict[str, Strategy] = {
            "pods": PodStrategy(),
            "namespaces": NamespaceStrategy(),
            CRDS: CRDStrategy(catalog),
            WEBHOOK_CONFIGURATIONS: WebhookConfigurationStrategy(admission),
            **workloads.STRATEGIES,
            **RBAC_STRATEGIES,
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
        handlers = Handlers(
            registry, catalog, Discovery(catalog, address), watch=settings.watch, ready=lambda: ready, metrics=metrics
        )
        app = web.Application(client_max_size=settings.max_body_bytes)
        gate = _gate(settings, registry, handlers)
        app.router.add_route("*", "/{tail:.*}", gate)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        cert = None
        if settings.token is not None:
            cert = pki.ensure_serving_cert(_cert_dir(settings, stack), host)
        site = web.SockSite(runner, sock, ssl_context=cert.context() if cert else None)
        await site.start()
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
