"""Fixtures of the agent's integration tests.

- The agent unit tests' fixtures (fixture node, sysfs tree, NVML environments).
- One real `tessera apiserver` process (CRDs installed) for the tests that talk to an API server,
  and clients for it. Tests use unique node names; tests that kill it start it again.
"""

from collections.abc import Iterator

import pytest

from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from kube.client import Client
from tests.unit.agent.conftest import fake_nvml, nvml, nvml_env, profile, sysfs

__all__ = ["apiserver", "client", "fake_nvml", "nvml", "nvml_env", "profile", "sysfs"]


@pytest.fixture(scope="session")
def apiserver() -> Iterator[EmbeddedAPIServer]:
    with run_apiserver() as server:
        server.install_crds()
        yield server


@pytest.fixture
def client(apiserver: EmbeddedAPIServer) -> Iterator[Client]:
    with apiserver.client() as c:
        yield c
