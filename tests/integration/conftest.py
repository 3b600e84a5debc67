"""A real `tessera apiserver` process per session (CRDs installed), and clients for it.

Tests isolate themselves with their own namespace (`namespace` fixture) or unique names, so they
share one server; tests that restart or kill a server start their own with `run_apiserver`.
"""

from collections.abc import Iterator

import kubernetes.client
import kubernetes.config
import pytest

from cli.launchers.apiserver import EmbeddedAPIServer
from kube.client import Client
from kube.resources import NAMESPACES
from tests.support import apiservers
from tests.support.cluster import unique

apiserver = apiservers.apiserver_fixture("session")


client = apiservers.client_fixture()


@pytest.fixture
def api_client(apiserver: EmbeddedAPIServer) -> Iterator[kubernetes.client.ApiClient]:
    """The official client, configured from the server's kubeconfig, with its typed APIs."""
    api = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    yield api
    api.close()


@pytest.fixture
def namespace(client: Client) -> str:
    name = unique("t")
    client.resource(NAMESPACES).create({"metadata": {"name": name}})
    return name
