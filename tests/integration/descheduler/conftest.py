"""Real parts for the descheduler: an embedded API server process, `tessera descheduler`
processes talking to it over HTTP, and pods, ReplicaSets and PodMigrationJobs written through
the API.

`StandIn` plays the scheduler's part — and kubelet's — where a test needs a handle on timing that
the real scheduler does not give: it marks Pending Reservations Available on a node when the test
says so (a Reservation held Pending while the descheduler must not evict; a kill -9 between
Available and the eviction), binds replacement pods onto them (with the `reservation-allocated`
annotation the scheduler writes) and reports them Ready after a chosen delay (maxUnavailable seen
at work). Tests that rely on it carry the `scheduler_stand_in` marker. The same path with every
part real — the scheduler placing the Reservations and the replacements, simulated kubelets —
is test_endtoend.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.descheduler import DeschedulerProcess
from cli.launchers.kubecontrollers import KubeControllersProcess
from kube.client import Client
from kube.resources import NAMESPACES
from tests.integration.descheduler.migrations import TIMEOUT
from tests.support import apiservers, starter
from tests.support.cluster import unique

apiserver = apiservers.apiserver_fixture("module")


client = apiservers.client_fixture("module")


@pytest.fixture
def namespace(client: Client) -> str:
    name = unique("d")
    client.resource(NAMESPACES).create({"metadata": {"name": name}})
    return name


@pytest.fixture
def start_descheduler(apiserver: EmbeddedAPIServer) -> Iterator[Callable[..., DeschedulerProcess]]:
    """Start descheduler processes (`start_descheduler("--dry-run")`); all are killed when the test
    ends (the jobs of one test are not the business of another test's descheduler)."""

    def new(directory: Path, args: Sequence[str]) -> DeschedulerProcess:
        return DeschedulerProcess(
            apiserver.kubeconfig, directory=directory, args=("--resync", "0.2", *args), verbosity=4
        )

    with starter.processes(
        new, prefix="tessera-descheduler-", show_logs_env="TESSERA_SHOW_DESCHEDULER_LOGS", timeout=TIMEOUT
    ) as start:
        yield start


@pytest.fixture
def kube_controllers(apiserver: EmbeddedAPIServer, tmp_path: Path) -> Iterator[KubeControllersProcess]:
    """`tessera kube-controller-manager`: ReplicaSets and Deployments recreate evicted pods."""
    process = KubeControllersProcess(apiserver.kubeconfig, directory=tmp_path / "kcm")
    process.start(timeout=TIMEOUT)
    yield process
    process.kill()
