"""Every wait of `tessera up`'s start-up ends by a deadline and says what it waited for, with
real processes: a scheduler whose API server never answers, the API server on a given port
(`--port`) beside an earlier run's kubeconfig, and the demo's wait for nodes that never get Ready.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from apis.errors import ConfigError
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess
from cli.localcluster import demo
from cli.localcluster.settings import DEFAULT_START_TIMEOUT_S
from cli.localcluster.supervisor import Supervised, SupervisorEvent
from kube.client import Client
from kube.kubeconfig import write_kubeconfig
from kube.resources import NAMESPACES, NODES
from tests.support.sockets import free_port

#: Short, so the test is; what matters is that it is kept, whatever the process does meanwhile.
DEADLINE_S = 3.0

pytestmark = pytest.mark.integration


@pytest.fixture
def silent_apiserver() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers: an API server
    that hangs. Its number."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield listener.getsockname()[1]


def test_a_component_that_never_gets_ready_fails_at_its_deadline_saying_what_it_waited_for(
    sock_dir: Path, silent_apiserver: int
) -> None:
    kubeconfig = sock_dir / "kubeconfig"
    write_kubeconfig(kubeconfig, f"http://127.0.0.1:{silent_apiserver}")
    scheduler = SchedulerProcess(kubeconfig, sock_dir)
    events: list[SupervisorEvent] = []
    supervised = Supervised("scheduler", scheduler, on_event=events.append, start_timeout=DEADLINE_S)

    began = time.monotonic()
    with pytest.raises(ConfigError) as raised:
        supervised.start()  # what tessera up does for each component
    took = time.monotonic() - began

    message = str(raised.value)
    assert message.startswith(f"scheduler was not ready within {DEADLINE_S:g} s: still waiting for GET http://")
    assert "/readyz to answer 200 (it answered 500: informer-sync failed" in message
    assert f"The end of its log ({scheduler.log_path}):" in message
    assert '"Serving HTTP"' in message  # the log's end, where a person looks next
    # It waited out the deadline it was given, not the default (how late it ended on top of
    # that is the machine's load, not the code's).
    assert DEADLINE_S <= took < DEFAULT_START_TIMEOUT_S
    assert not scheduler.running  # killed, not left behind
    assert events == []  # never reported as started
    supervised.stop()


def test_the_api_server_on_a_given_port_is_ready_beside_an_earlier_runs_kubeconfig(sock_dir: Path) -> None:
    """`tessera up --port P` on a data directory whose kubeconfig names the port of an earlier run."""
    port = free_port()
    write_kubeconfig(sock_dir / "kubeconfig", "https://127.0.0.1:1", token="old")
    server = EmbeddedAPIServer(sock_dir, secure=True)
    server.port = port
    try:
        server.start(timeout=60)
        assert server.url == f"https://127.0.0.1:{port}"
        with server.client() as client:
            assert "default" in {ns["metadata"]["name"] for ns in client.resource(NAMESPACES).list().items}
        first = server.pid
        server.restart(timeout=60)  # as the supervisor restarts it: the same port
        assert (server.pid != first, server.url) == (True, f"https://127.0.0.1:{port}")
        with server.client() as client:
            client.resource(NAMESPACES).get("default")
    finally:
        server.stop()


def test_the_demo_waits_for_its_nodes_until_the_deadline_and_says_what_each_lacks(client: Client) -> None:
    registered, not_ready, missing = (f"up-{uuid.uuid4().hex[:6]}-{n}" for n in ("no-gpus", "not-ready", "missing"))
    for name, ready in ((registered, "True"), (not_ready, "False")):
        status = {"conditions": [{"type": "Ready", "status": ready}]}
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}
        client.resource(NODES).create(node)

    began = time.monotonic()
    lacking = demo.wait_nodes_ready(client, [registered, missing], [not_ready], timeout=1.0)
    took = time.monotonic() - began

    assert {name: what.split(" (")[0] for name, what in lacking.items()} == {
        registered: "offers no GPUs: no koordinator.sh/gpu-core in its allocatable",
        not_ready: "not Ready",
        missing: "not registered",
    }
    assert took >= 1.0  # it waited out its deadline (a wait without one would never return)
