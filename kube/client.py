"""Constructing the one client every component uses: the official `kubernetes` library.

A `Client` comes from a kubeconfig (`--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`), from the
in-cluster service account, or from the kubeconfig the embedded API server writes; after that all
are the same. Requests go through the official client's `ApiClient` (configuration, auth and
token refresh, TLS, connection pool) but bodies are decoded as plain JSON instead of the library's
model classes, which are slow and lossy for custom resources; `apis` parses the dicts.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes.client
import kubernetes.config
import urllib3

from apis.errors import ConfigError
from apis.extension.names import GroupVersionResource
from kube import errors
from kube.resources import ResourceAPI
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
        self, configuration: kubernetes.client.Configuration, *, timeout: float = 30.0, user_agent: str = "tessera"
    ) -> None:
        self.api_client = kubernetes.client.ApiClient(configuration)
        self.api_client.user_agent = user_agent
        self.timeout = timeout
        self.host: str = configuration.host

    # --- construction ------------------------------------------------------------------------------
    @classmethod
    def from_settings(cls, settings: ClientSettings) -> Client:
        configuration = kubernetes.client.Configuration()
        try:
            if settings.kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ:
                kubernetes.config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]  # untyped library
            else:
                path = settings.kubeconfig or os.environ.get("KUBECONFIG") or Path.home() / ".kube" / "config"
                kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]  # untyped library
                    config_file=str(path),
                    context=settings.context,
                    client_configuration=configuration,
                    persist_config=False,
                )
        except (kubernetes.config.ConfigException, OSError) as e:
            raise ConfigError(f"cannot configure the Kubernetes client: {e}") from e
        configuration.connection_pool_maxsize = settings.pool_size
        return cls(configuration, timeout=settings.timeout, user_agent=settings.user_agent)

    @classmethod
    def from_kubeconfig(cls, path: Path | str, *, context: str | None = None, user_agent: str = "tessera") -> Client:
        return cls.from_settings(ClientSettings(kubeconfig=Path(path), context=context, user_agent=user_agent))

    @classmethod
    def in_cluster(cls, *, user_agent: str = "tessera") -> Client:
        if "KUBERNETES_SERVICE_HOST" not in os.environ:
            raise ConfigError("not running in a pod: KUBERNETES_SERVICE_HOST is not set")
        return cls.from_settings(ClientSettings(user_agent=user_agent))

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
        header_params = {"Accept": "application/json", **(headers or {})}
        if body is not None:
            header_params["Content-Type"] = content_type
        with errors.translated():
            serialized = self.api_client.param_serialize(
                method=method,
                resource_path=path,
                query_params=list(query),
                header_params=header_params,
                body=body,
                auth_settings=["BearerToken"],
            )
            response: urllib3.BaseHTTPResponse = self.api_client.call_api(
                *serialized, _request_timeout=timeout or self.timeout
            ).response
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
        self.api_client.close()  # type: ignore[no-untyped-call]  # untyped library

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
