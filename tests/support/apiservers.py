"""The `apiserver` and `client` fixtures, made once for every suite that talks to a real API server.

Suites differ only in how long one server lives: a session (tests/integration), a module (a
component's own cluster: the scheduler sees every node, so one module's nodes must not reach
another's) or a test (one that restarts or fills the cluster); and in whether it serves HTTPS with
a token (`secure`, as `tessera up` runs it). So a conftest or test module says just that:

    apiserver = apiservers.apiserver_fixture("module")
    client = apiservers.client_fixture("module")

The server is a real `tessera apiserver` process with the CRDs of deploy/crds installed, stopped
(and its directory removed) when the scope ends; a client is closed when its scope ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Literal

import pytest

from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from kube.client import Client

__all__ = ["Scope", "apiserver_fixture", "client_fixture"]

Scope = Literal["session", "package", "module", "class", "function"]


def apiserver_fixture(scope: Scope, *, secure: bool = False) -> Callable[[], Iterator[EmbeddedAPIServer]]:
    """A fixture named `apiserver`: a started server with the CRDs installed, for `scope`."""

    @pytest.fixture(scope=scope, name="apiserver")
    def apiserver() -> Iterator[EmbeddedAPIServer]:
        with run_apiserver(secure=secure) as server:
            server.install_crds()
            yield server

    return apiserver


def client_fixture(scope: Scope = "function") -> Callable[[EmbeddedAPIServer], Iterator[Client]]:
    """A fixture named `client`: a `kube.Client` of the `apiserver` fixture's server, for `scope`
    (no longer than the server's)."""

    @pytest.fixture(scope=scope, name="client")
    def client(apiserver: EmbeddedAPIServer) -> Iterator[Client]:
        with apiserver.client() as c:
            yield c

    return client
