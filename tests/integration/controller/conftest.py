"""Real parts for the controller: an embedded API server process, `tessera controller` processes
talking to it over HTTP, Nodes as kubelet reports them and Device CRs as the agent builds them.

The API server is shared by the tests of a module; each test uses its own node names. The
objects and the waits on the controller's own /metrics are in nodes.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.controller import ControllerProcess
from tests.integration.controller.nodes import TIMEOUT
from tests.support import apiservers, starter

apiserver = apiservers.apiserver_fixture("module")


client = apiservers.client_fixture("module")


@pytest.fixture(scope="module")
def start_controller(apiserver: EmbeddedAPIServer) -> Iterator[Callable[..., ControllerProcess]]:
    """Start controllers (`start_controller("--leader-elect", ...)`); all are killed at the end."""

    def new(directory: Path, args: Sequence[str]) -> ControllerProcess:
        return ControllerProcess(apiserver.kubeconfig, directory=directory, args=args, verbosity=4)

    with starter.processes(
        new, prefix="tessera-controller-", show_logs_env="TESSERA_SHOW_CONTROLLER_LOGS", log_lines=400, timeout=TIMEOUT
    ) as start:
        yield start
