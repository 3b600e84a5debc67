"""The one client every component uses: `Client`, and `ClientSettings` (the flags that find the server).

A `Client` comes from a kubeconfig (`--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`), from the
in-cluster service account, or from the kubeconfig the embedded API server writes
(`kube.clientconfig` reads them into a `RESTConfig`); after that all are the same. Requests go
straight through a urllib3 connection pool (`kube.connection`: TLS, client certificates, proxy)
with the Authorization header the configuration's credentials give, and bodies are plain JSON:
`apis` parses the dicts. The `kubernetes` library is not on this path: its `ApiClient` only
serialized, authenticated and sent these same requests, and importing it costs a component
about 20 MiB (its model classes, pydantic, requests) and a quarter of a second. Only a kubeconfig
with a credential plugin loads it (`kube.authplugins`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import urllib3

from apis.extension.names import GroupVersionResource
from kube import clientconfig, connection, errors
from kube.resources import ResourceAPI
from kube.restconfig import RESTConfig
from kube.transport import STREAM_ERRORS

__all__ = ["Client", "ClientSettings"]


@dataclass(frozen=True, slots=True)
class ClientSettings:
    #: A kubeconfig file; None: in-cluster when running in a pod, else $KUBECONFIG or ~/.kube/config.
    kubeconfig: Path | None = None
    context: str | None = None
    #: Seconds a request may take (watches set their own).
    timeout: float = 30.0
    #: Connections kept per host (each open watch holds one).
    pool_size: int = 64
    user_agent: str = "tessera"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """The flags every component takes to find its API server."""
        parser.add_argument("--kubeconfig", type=Path, metavar="PATH", help="kubeconfig file (default: in-cluster)")
        parser.add_argument("--context", metavar="NAME", help="kubeconfig context to use")

    @classmethod
    def from_args(cls, args: argparse.Namespace, *, user_agent: str = "tessera") -> ClientSettings:
        return cls(kubeconfig=args.kubeconfig, context=args.context, user_agent=user_agent)


class Client:
    """A connection to one API server (a `kube.transport.Transport`). Thread-safe; close it (or use
    `with`) when done."""

    def __init__(
        self,
        config: RESTConfig,
        *,
        timeout: float = 30.0,
        user_agent: str = "tessera",
        pool_size: int = 64,
        retries: int | None = None,
    ) -> None:
        """Raises ConfigError when the TLS files do not load. `retries`: tries on connection
        errors (None: urllib3's default, 3)."""
        self.config = config
        self.host: str = config.server
        self.timeout = timeout
        self.user_agent = user_agent
        self._pool = connection.pool_manager(config, maxsize=pool_size, retries=retries)
        self._direct = connection.direct_pool(config, maxsize=pool_size, retries=retries)
        #: The server URL's path, when it has one (an API server behind a path-routing proxy).
        self._prefix = urlsplit(config.server).path.rstrip("/")

    # --- construction ------------------------------------------------------------------------------
    @classmethod
    def from_settings(cls, settings: ClientSettings) -> Client:
        """Raises ConfigError for a kubeconfig or service account that cannot be used."""
        return cls(
            clientconfig.load(settings),
            timeout=settings.timeout,
            user_agent=settings.user_agent,
            pool_size=settings.pool_size,
        )

    @classmethod
    def from_kubeconfig(cls, path: Path | str, *, context: str | None = None, user_agent: str = "tessera") -> Client:
        return cls.from_settings(ClientSettings(kubeconfig=Path(path), context=context, user_agent=user_agent))

    @classmethod
    def in_cluster(cls, *, user_agent: str = "tessera") -> Client:
        """The pod's service account; raises ConfigError outside a pod."""
        return cls(clientconfig.in_cluster(), user_agent=user_agent)

    # --- use -----------------------------------------------------------------------------------------
    def resource(self, gvr: GroupVersionResource) -> ResourceAPI:
        """Dict-level access to one resource type (`kube.resources.PODS`, `apis.extension.names.DEVICES`)."""
        return ResourceAPI(self, gvr)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        """Send one request and return the decoded JSON body; raises kube.errors.APIError."""
        if self._direct is None:
            return self._request_through_urllib3(
                method, path, query=query, body=body, content_type=content_type, timeout=timeout
            )
        data, body_type = _encoded(body, content_type)
        limit = timeout or self.timeout
        connect, read, total = (limit[0], limit[1], None) if isinstance(limit, tuple) else (limit, limit, limit)
        with errors.translated():
            header = self._headers(body_type)
            response = self._direct.request(
                method,
                self._prefix + _target(path, query),
                header,
                data,
                connect_timeout=connect,
                read_timeout=read,
                total_timeout=total,
            )
        if not 200 <= response.status <= 299:
            raise errors.from_response(response.status, response.body, reason=response.reason)
        return json.loads(response.body) if response.body else None

    def _request_through_urllib3(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        body: Any,
        content_type: str,
        timeout: float | tuple[float, float] | None,
    ) -> Any:
        response = self.open(method, path, query=query, body=body, content_type=content_type, timeout=timeout)
        try:
            data = response.data
        except STREAM_ERRORS as e:
            raise errors.Unreachable(f"reading the response failed: {e}") from e
        finally:
            response.release_conn()
        return json.loads(data) if data else None

    def open(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> urllib3.BaseHTTPResponse:
        """Send one request and return the unread response (for streams); raises on non-2xx."""
        data, body_type = _encoded(body, content_type)
        url = self.host + _target(path, query)
        with errors.translated():
            header = {**self._headers(body_type), **(headers or {})}
            response = self._pool.request(
                method,
                url,
                body=data,
                headers=header,
                timeout=_timeout(timeout or self.timeout),
                preload_content=False,
            )
        if not 200 <= response.status <= 299:
            try:
                data = response.data
            except STREAM_ERRORS:
                data = b""
            finally:
                response.release_conn()
            raise errors.from_response(response.status, data, reason=response.reason or "")
        return response

    def close(self) -> None:
        self._pool.clear()
        if self._direct is not None:
            self._direct.close()

    def _headers(self, content_type: str | None) -> dict[str, str]:
        """Accept, User-Agent, Content-Type (for a body) and the credentials' Authorization (a
        token file is read again when due, an exec plugin run: both may fail like a request)."""
        header = {"Accept": "application/json", "User-Agent": self.user_agent}
        if content_type is not None:
            header["Content-Type"] = content_type
        authorization = self.config.credentials.authorization() if self.config.credentials else None
        if authorization:
            header["Authorization"] = authorization
        return header

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _encoded(body: Any, content_type: str) -> tuple[bytes | None, str | None]:
    """The request body as JSON bytes and its Content-Type; (None, None) without a body."""
    if body is None:
        return None, None
    return json.dumps(body).encode(), content_type


def _target(path: str, query: Sequence[tuple[str, str]]) -> str:
    return path + (f"?{urlencode(list(query), quote_via=quote)}" if query else "")


def _timeout(limit: float | tuple[float, float]) -> urllib3.Timeout:
    """Seconds for the whole request, or (connect, read) for a stream that may stay quiet."""
    if isinstance(limit, tuple):
        return urllib3.Timeout(connect=limit[0], read=limit[1])
    return urllib3.Timeout(total=limit)
