"""The processes `tessera up` runs, with the flags and places each gets in the data directory.

    DATA_DIR/kubeconfig, token, db/, apiserver.log     the API server (HTTPS, bearer token)
    DATA_DIR/controller/                               `tessera controller`: log, address file
    DATA_DIR/scheduler/                                `tessera scheduler`: log, address file,
                                                       config.yaml (its profiles)
    DATA_DIR/agents/NODE/                              one `tessera agent` per node: log, address
                                                       file, state/ (its --state-dir), hook socket
                                                       (this machine's agent)

Every component talks to the API server through the kubeconfig, as in a cluster; each serves
HTTP on a port it picks itself and writes the address to its directory, so nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from apis.extension import names
from cli.launchers.agent import AgentProcess
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.controller import ControllerProcess
from cli.launchers.scheduler import SchedulerProcess
from cli.localcluster.state import ComponentState
from kube.process import ServingProcess
from scheduler.framework.config import KUBE_DEFAULT_SCHEDULER

__all__ = ["Component", "apiserver", "controller", "local_agent", "scheduler", "simulated_agent"]

#: A unix socket path must fit in 108 bytes (with its terminating NUL).
_MAX_SOCKET_PATH: Final = 100
#: On a node of its own each agent would have the whole machine; here they share it, and node
#: QoS would have them fight over this machine's cgroups. docs/agent.md#node-qos.
_AGENT_FLAGS: Final = ("--simulate-kubelet", "--qos", "off")
#: There is no kube-scheduler here: without a profile for `default-scheduler` (what the API
#: server fills in when a pod names no scheduler), such pods would stay Pending with no Event.
_SCHEDULER_CONFIG: Final = f"""\
# Written by `tessera up`: pods that name no scheduler get {KUBE_DEFAULT_SCHEDULER}, and there
# is no kube-scheduler in this cluster, so this scheduler serves both names, alike.
profiles:
"""


def _scheduler_config(plugins: Sequence[str]) -> str:
    """Both profiles, each also enabling the opt-in `plugins` (ElasticQuota) when given."""
    enabled = ", ".join(f"{{name: {name}}}" for name in plugins)
    extra = f"\n    plugins:\n      multiPoint:\n        enabled: [{enabled}]" if plugins else ""
    return _SCHEDULER_CONFIG + "".join(
        f"  - schedulerName: {profile}{extra}\n" for profile in (names.SCHEDULER_NAME, KUBE_DEFAULT_SCHEDULER)
    )


@dataclass(frozen=True, slots=True)
class Component:
    """One supervised process and what to tell people about it."""

    #: Its key in the state file: `apiserver`, `controller`, `scheduler`, `agent/NODE`.
    name: str
    #: For the console: what it is (`agent sim-1: simulated a100-8x`).
    title: str
    process: EmbeddedAPIServer | ServingProcess
    node: str = ""

    def state(self, restarts: int) -> ComponentState:
        """What the state file says about it now."""
        process = self.process
        return ComponentState(
            pid=process.pid,
            log=str(process.log_path),
            url=process.url,
            restarts=restarts,
            node=self.node,
            grpc=process.grpc_address if isinstance(process, SchedulerProcess) else "",
            hook_socket=_hook_socket(process),
        )


def _hook_socket(process: ServingProcess | EmbeddedAPIServer) -> str:
    if isinstance(process, AgentProcess) and "--no-hook-server" not in process.args:
        return str(process.hook_socket)
    return ""


def apiserver(data_dir: Path, *, port: int) -> Component:
    """The embedded API server over HTTPS with a bearer token, objects in `DATA_DIR/db`."""
    server = EmbeddedAPIServer(data_dir, secure=True)
    server.port = port  # 0: a free one, kept for its restarts (the others' kubeconfig stays valid)
    return Component("apiserver", "apiserver", server)


def controller(data_dir: Path, kubeconfig: Path) -> Component:
    return Component("controller", "controller", ControllerProcess(kubeconfig, directory=data_dir / "controller"))


def scheduler(data_dir: Path, kubeconfig: Path, *, grpc_address: str, plugins: Sequence[str] = ()) -> Component:
    """`tessera scheduler` with profiles for both `tessera-scheduler` and `default-scheduler`
    (`DATA_DIR/scheduler/config.yaml`, rewritten on every start), each also enabling the opt-in
    `plugins` (the soak turns on ElasticQuota)."""
    directory = data_dir / "scheduler"
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "config.yaml"
    config.write_text(_scheduler_config(plugins), encoding="utf-8")
    process = SchedulerProcess(kubeconfig, directory, grpc_address=grpc_address, extra_args=["--config", str(config)])
    return Component("scheduler", "scheduler", process)


def simulated_agent(data_dir: Path, kubeconfig: Path, *, node: str, profile: str) -> Component:
    """A node with simulated devices; nothing calls hooks on it, so it serves none."""
    process = AgentProcess(
        kubeconfig,
        node_name=node,
        directory=data_dir / "agents" / node,
        args=[*_AGENT_FLAGS, "--simulate-devices", profile, "--no-hook-server"],
    )
    return Component(f"agent/{node}", f"agent {node}: simulated {profile}", process, node=node)


def local_agent(data_dir: Path, kubeconfig: Path, *, node: str) -> Component:
    """This machine, with real discovery. Its hook server listens in its directory (for a runtime
    proxy to be pointed at), unless that path is too long for a unix socket."""
    directory = data_dir / "agents" / node
    hooks = [] if len(str(directory / "agent.sock")) <= _MAX_SOCKET_PATH else ["--no-hook-server"]
    process = AgentProcess(kubeconfig, node_name=node, directory=directory, args=[*_AGENT_FLAGS, *hooks])
    return Component(f"agent/{node}", f"agent {node}: this machine", process, node=node)
