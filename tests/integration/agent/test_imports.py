"""What a started agent has imported, per configuration: only the libraries that configuration uses.

The agent's memory is mostly its imports (docs/agent.md, "Cost"): the `kubernetes` library
(about 20 MiB) is never needed, gRPC and the runtime API's protobuf messages (about 16 MiB)
only with a hook server, pyroute2 (about 8 MiB) only when RDMA netdevs are read over netlink or
network QoS runs. Each case starts an `Agent` in a fresh interpreter against the API server and
lists the top-level packages in `sys.modules` once it has started.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cli.launchers.apiserver import EmbeddedAPIServer
from tests.support import sockets
from tests.support.sysfs_tree import SysfsTree

pytestmark = pytest.mark.integration

#: Never loaded by the agent: the library and what only it pulled in.
NEVER = {"kubernetes", "pydantic", "requests", "oauthlib", "google.auth", "websocket"}
HOOKS = {"grpc", "google.protobuf"}
NETLINK = {"pyroute2"}

_START_AND_LIST = """
import argparse, json, sys
from cli import agent as command
parser = argparse.ArgumentParser()
command.add_arguments(parser)
settings = command.settings_from(parser.parse_args(sys.argv[1:]))
from agent.app import Agent
agent = Agent(settings)
agent.start()
try:
    print(json.dumps(sorted(sys.modules)))
finally:
    agent.stop()
"""


def loaded_after_start(apiserver: EmbeddedAPIServer, directory: Path, node: str, flags: list[str]) -> set[str]:
    """The modules of a fresh interpreter that started an agent with `flags`."""
    common = ["--node-name", node, "--kubeconfig", str(apiserver.kubeconfig), "--metrics-address", "127.0.0.1:0"]
    common += ["--hook-socket", str(directory / "agent.sock"), "--state-dir", str(directory / "state")]
    run = subprocess.run(
        [sys.executable, "-c", _START_AND_LIST, *common, *flags], check=False, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return set(json.loads(run.stdout.strip().splitlines()[-1]))


def present(modules: set[str], names: set[str]) -> set[str]:
    return {name for name in names if name in modules}


def test_importing_the_agent_and_its_command_loads_none_of_the_optional_libraries() -> None:
    code = "import json, sys, agent.app, cli.agent; print(json.dumps(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert present(set(json.loads(run.stdout)), NEVER | HOOKS | NETLINK) == set()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--simulate-devices", "a100-8x", "--simulate-kubelet", "--no-hook-server"], set()),
        (["--simulate-devices", "a100-8x", "--simulate-kubelet"], HOOKS),
        (["--no-nvml", "--no-netlink", "--no-hook-server"], set()),
        (["--no-nvml", "--no-hook-server"], NETLINK),
    ],
    ids=["simulated-no-hooks", "simulated-hooks", "rdma-without-netlink", "rdma-with-netlink"],
)
def test_a_started_agent_loads_only_what_its_configuration_uses(
    apiserver: EmbeddedAPIServer, sysfs: SysfsTree, flags: list[str], expected: set[str]
) -> None:
    """The fixture sysfs tree has a dual-port RDMA NIC; QoS is off (simulated, or no kubepods here)."""
    with sockets.temporary() as directory:
        node = f"imports-{uuid.uuid4().hex[:8]}"
        modules = loaded_after_start(apiserver, directory, node, [*flags, "--sysfs-root", str(sysfs.root)])
    assert present(modules, NEVER) == set()
    assert present(modules, HOOKS | NETLINK) == expected
