"""Credentials from the kubeconfig's credential plugins (`exec`, `auth-provider`), through the
`kubernetes` library: the one module that still imports it.

Cloud logins (`aws eks get-token`, `gke-gcloud-auth-plugin`, OIDC) run a command or an OAuth
flow and refresh the token when it expires; the library implements all of them, so we keep it
for these users rather than write them again. `kube.clientconfig` imports this module only for
such a user, so a node agent with a service account or a token never loads the library (its
models, pydantic, requests, google-auth: about 20 MiB). The library fills in its own
`Configuration`; this module reads the token from it on every request (its refresh hook runs
the plugin again when the token has expired) and, when the plugin answered with a client
certificate instead, the certificate files it wrote.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import kubernetes.client
import kubernetes.config

from apis.errors import ConfigError
from kube import errors
from kube.restconfig import Credentials, TLSConfig

__all__ = ["credentials"]


class _PluginCredentials:
    """The token the library's configuration holds, refreshed by the library when it expires."""

    def __init__(self, configuration: kubernetes.client.Configuration, source: str) -> None:
        self._configuration = configuration
        self._source = source
        self._lock = threading.Lock()  # the library's refresh hook is not thread-safe

    def authorization(self) -> str | None:
        with self._lock:
            try:
                value: str | None = self._configuration.get_api_key_with_prefix("BearerToken")
            except (kubernetes.config.ConfigException, OSError, ValueError) as e:
                raise errors.Unauthorized(f"{self._source}: the credential plugin failed: {e}") from e
        return value

    def __repr__(self) -> str:
        return f"_PluginCredentials({self._source!r})"


def credentials(
    paths: Sequence[Path], *, context: str, source: str, tls: TLSConfig
) -> tuple[Credentials | None, TLSConfig]:
    """Run the user's plugin of `context` in the kubeconfig `paths` (raises ConfigError when it
    fails) and return its credentials, with `tls` (the kubeconfig's client certificate) or the
    certificate the plugin returned when the kubeconfig has none."""
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]  # untyped library
            config_file=":".join(str(p) for p in paths),
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (kubernetes.config.ConfigException, OSError, ValueError) as e:
        raise ConfigError(f"{source}: the credential plugin failed: {e}") from e
    if configuration.cert_file and configuration.key_file and not tls.has_client_cert:
        tls = TLSConfig(cert_file=Path(configuration.cert_file), key_file=Path(configuration.key_file))
    return _PluginCredentials(configuration, source), tls
