"""Posting an AdmissionReview to one webhook over HTTPS, on the event loop (aiohttp, never blocking).

Where a webhook lives: `clientConfig.url` as given; `clientConfig.service` is resolved inside this
server, which has no cluster network, the way kube-apiserver resolves it with
`--enable-aggregator-routing`: the Service `namespace/name` (an ExternalName Service gives its
host), then its Endpoints — the service port numbered `port` (default 443), the endpoint port of
the same name, the first address. `tessera up` registers the controller's webhook as a Service and
Endpoints pointing at it (docs/user/apiserver.md). Either way the serving certificate is verified
against `caBundle` (the system's roots when empty) and, for a service, against the name
`NAME.NAMESPACE.svc`, as kube-apiserver verifies it.

Failures raise `CallFailed` with kube-apiserver's wording (`failed to call webhook: Post "URL":
context deadline exceeded`, `... x509: certificate signed by unknown authority`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from apiserver.admission.config import ServiceRef, Webhook
from apiserver.admission.review import CallFailed

__all__ = ["Lookup", "Sessions", "post"]

#: (storage id, namespace, name) -> the stored object, or None.
Lookup = Callable[[str, str, str], Mapping[str, Any] | None]
#: OpenSSL's verify codes for a chain that does not lead to a trusted CA (self-signed, issuer
#: unknown), which Go reports as one error.
_UNTRUSTED = frozenset({18, 19, 20, 21})
_UNKNOWN_AUTHORITY = "certificate signed by unknown authority"
#: The largest answer read from a webhook.
MAX_RESPONSE_BYTES = 3 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Target:
    #: What messages show (kube-apiserver's URL, with `?timeout=`).
    shown: str
    #: Where the request goes.
    connect: str
    #: The name the certificate must carry (None: the URL's host).
    server_hostname: str | None = None
    host_header: str | None = None


@functools.lru_cache(maxsize=64)
def _tls(ca_bundle: bytes) -> ssl.SSLContext:
    """A client context trusting `ca_bundle` (PEM), or the system's roots when empty."""
    if not ca_bundle:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cadata=ca_bundle.decode("ascii", "replace"))
    except ssl.SSLError as e:
        raise CallFailed(f"failed to call webhook: invalid caBundle: {e.reason or e}") from None


def _service_target(service: ServiceRef, timeout: str, lookup: Lookup) -> _Target:
    shown = f"https://{service.host}:{service.port}{service.path}{timeout}"
    svc = lookup("services", service.namespace, service.name)
    if svc is None:
        raise CallFailed(f'failed to call webhook: Post "{shown}": service "{service.name}" not found')
    spec = svc.get("spec") or {}
    if spec.get("type") == "ExternalName" and spec.get("externalName"):
        connect = f"https://{spec['externalName']}:{service.port}{service.path}{timeout}"
        return _Target(shown, connect, service.host)
    port_name = next(
        (p.get("name", "") for p in spec.get("ports") or () if isinstance(p, dict) and p.get("port") == service.port),
        None,
    )
    if port_name is None:
        raise CallFailed(
            f'failed to call webhook: Post "{shown}": no service port {service.port} found for service "{service.name}"'
        )
    endpoints = lookup("endpoints", service.namespace, service.name) or {}
    for subset in endpoints.get("subsets") or ():
        addresses = [str(a["ip"]) for a in subset.get("addresses") or () if isinstance(a, dict) and a.get("ip")]
        ports = [p for p in subset.get("ports") or () if isinstance(p, dict)]
        port = next((p.get("port") for p in ports if p.get("name", "") == port_name), None)
        if addresses and isinstance(port, int):
            host = f"[{addresses[0]}]" if ":" in addresses[0] else addresses[0]
            connect = f"https://{host}:{port}{service.path}{timeout}"
            return _Target(shown, connect, service.host, f"{service.host}:{service.port}")
    raise CallFailed(f'failed to call webhook: Post "{shown}": no endpoints available for service "{service.name}"')


def _target(webhook: Webhook, lookup: Lookup) -> _Target:
    timeout = f"?timeout={webhook.timeout_seconds}s"
    if webhook.service is not None:
        return _service_target(webhook.service, timeout, lookup)
    assert webhook.url is not None
    return _Target(webhook.url + timeout, webhook.url + timeout)


def _reason(error: BaseException) -> str:
    """Go's words for a failed HTTP call, where they differ from Python's."""
    if isinstance(error, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return "context deadline exceeded"
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        cert_error = error.certificate_error
        code = getattr(cert_error, "verify_code", 0)
        detail = (
            _UNKNOWN_AUTHORITY if code in _UNTRUSTED else getattr(cert_error, "verify_message", "") or str(cert_error)
        )
        return f"tls: failed to verify certificate: x509: {detail}"
    if isinstance(error, aiohttp.ClientConnectorError):
        os_error = error.os_error
        strerror = os.strerror(os_error.errno) if os_error.errno else str(os_error)  # asyncio's strerror is its own
        return f"dial tcp {error.host}:{error.port}: connect: {strerror.lower()}"
    return str(error) or type(error).__name__


class Sessions:
    """Kept-alive connections to webhooks (a TLS handshake per call would cost more than most
    webhooks take to answer). One session per (caBundle, server name), so a connection verified
    for one name is never reused for another. Idle connections are dropped after 15 s, before the
    webhook server drops them (`kube.serving` waits 30 s), and a request on a connection the server
    closed anyway is sent once more (validation has no side effects: sideEffects None)."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[bytes, str | None], aiohttp.ClientSession] = {}

    def get(self, ca_bundle: bytes, server_hostname: str | None) -> aiohttp.ClientSession:
        key = (ca_bundle, server_hostname)
        session = self._sessions.get(key)
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(limit=64, keepalive_timeout=15)
            session = self._sessions[key] = aiohttp.ClientSession(connector=connector)
        return session

    async def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()


async def post(webhook: Webhook, review: Mapping[str, Any], lookup: Lookup, sessions: Sessions) -> bytes:
    """POST `review` to `webhook` within its timeoutSeconds; the answer's body (HTTP 2xx only)."""
    target = _target(webhook, lookup)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if target.host_header:
        headers["Host"] = target.host_header
    timeout = aiohttp.ClientTimeout(total=webhook.timeout_seconds)
    data = json.dumps(review).encode()
    session = sessions.get(webhook.ca_bundle, target.server_hostname)
    for attempt in (1, 2):
        try:
            async with session.post(
                target.connect,
                data=data,
                headers=headers,
                ssl=_tls(webhook.ca_bundle),
                server_hostname=target.server_hostname,
                timeout=timeout,
            ) as response:
                body = await response.content.read(MAX_RESPONSE_BYTES)
                status = response.status
            break
        except aiohttp.ServerDisconnectedError as e:
            if attempt == 2:
                raise CallFailed(f'failed to call webhook: Post "{target.shown}": {_reason(e)}') from None
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise CallFailed(f'failed to call webhook: Post "{target.shown}": {_reason(e)}') from None
    if not 200 <= status < 300:
        raise CallFailed(
            f"failed to call webhook: the server responded with the status code {status} "
            f"but did not return more information"
        )
    return body
