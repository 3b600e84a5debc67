"""Real parts for scheduler tests: an embedded API server per module (GPU nodes, pods and watches
on them: `tests/support/cluster.py`).

Each module gets its own API server, because nodes are cluster-scoped and a scheduler sees every
node: tests in one module must not see another module's cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.launchers.apiserver import EmbeddedAPIServer
from kube import Client
from tests.support import apiservers

apiserver = apiservers.apiserver_fixture("module")


client = apiservers.client_fixture()


@pytest.fixture(scope="module")
def module_client(apiserver: EmbeddedAPIServer) -> Iterator[Client]:
    with apiserver.client() as c:
        yield c


@pytest.fixture
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # unix socket paths are limited to ~107 bytes: keep them short
    return Path(tmp_path_factory.mktemp("s", numbered=True))
