"""What `tessera up` is asked to run: its flags as one value, checked before anything starts."""

from __future__ import annotations

import math
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from apis.errors import ConfigError

__all__ = [
    "DEFAULT_DATA_DIR",
    "DEFAULT_START_TIMEOUT_S",
    "MAX_NODES",
    "UpSettings",
    "local_node_name",
    "simulated_node_names",
]

#: Relative to where `tessera up` runs (a checkout's `.gitignore` lists it).
DEFAULT_DATA_DIR: Final = Path("tessera-data")
#: Each simulated node is a process of its own (about 60 MiB); more is a benchmark, not a demo.
MAX_NODES: Final = 50
#: Generous for a loaded 2-core machine (a component is ready in 1–3 s there); a wait ends as
#: soon as its condition holds, so only a start that went wrong waits this long.
DEFAULT_START_TIMEOUT_S: Final = 120.0
_NOT_IN_A_NODE_NAME = re.compile(r"[^a-z0-9.-]+")


@dataclass(frozen=True, slots=True)
class UpSettings:
    #: Where the API server keeps its objects, and where logs, sockets and the state file go.
    data_dir: Path = DEFAULT_DATA_DIR
    #: Simulated nodes, each an agent process with `--simulate-devices profile`.
    nodes: int = 2
    profile: str = "a100-8x"
    #: The API server's port; 0 picks a free one.
    port: int = 0
    #: Also run an agent with real discovery for this machine.
    local_agent: bool = True
    #: Submit the demo workload and print where it went.
    demo: bool = False
    #: The scheduler's gRPC API (`tessera explain` finds the per-user default without being told).
    scheduler_address: str = ""
    #: Seconds each start-up step may take: a component getting ready, the CRDs being
    #: established, the demo's nodes getting Ready. Past it, `tessera up` stops and says why.
    start_timeout: float = DEFAULT_START_TIMEOUT_S
    #: Opt-in scheduler plugins enabled in both profiles: ElasticQuota (the demo's teams share
    #: GPUs by quota, docs/user/quota.md).
    scheduler_plugins: tuple[str, ...] = ("ElasticQuota",)
    #: Extra flags of the kube-controller-manager (the soak's short node monitor grace) and of
    #: every simulated node's agent (its Lease renewal interval).
    kube_controller_manager_args: tuple[str, ...] = ()
    agent_args: tuple[str, ...] = ()
    #: Also run Prometheus (Debian's, found on PATH) scraping every component, with
    #: deploy/monitoring's rules (`--prometheus`).
    prometheus: bool = False

    def validate(self) -> None:
        """Raise ConfigError naming every problem at once."""
        problems = []
        if not 0 <= self.nodes <= MAX_NODES:
            problems.append(f"--nodes {self.nodes}: must be between 0 and {MAX_NODES}")
        if not 0 <= self.port <= 65535:
            problems.append(f"--port {self.port}: must be between 0 and 65535")
        if not 0 < self.start_timeout < math.inf:  # NaN fails too: every wait needs a deadline
            problems.append(f"--start-timeout {self.start_timeout:g}: must be a number of seconds above 0")
        if self.nodes == 0 and not self.local_agent:
            problems.append("no node to run: --nodes 0 together with --no-local-agent")
        if self.data_dir.exists() and not self.data_dir.is_dir():
            problems.append(f"--data-dir {self.data_dir}: exists and is not a directory")
        if problems:
            raise ConfigError("; ".join(problems))


def simulated_node_names(count: int) -> list[str]:
    """`sim-1` ... `sim-N`: the same names on every start, so a restart finds its nodes again."""
    return [f"sim-{i}" for i in range(1, count + 1)]


def local_node_name(hostname: str | None = None) -> str:
    """This machine's host name as a valid Node name (lower case, DNS-1123), as kubelet derives it."""
    raw = (hostname if hostname is not None else socket.gethostname()).lower()
    name = _NOT_IN_A_NODE_NAME.sub("-", raw).strip("-.")[:63].strip("-.")
    return name or "localhost"
