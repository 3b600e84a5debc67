"""The processes `tessera up` runs, with the flags and places each gets in the data directory.

    DATA_DIR/kubeconfig, token, db/, apiserver.log     the API server (HTTPS, bearer token)
    DATA_DIR/tokens.csv, kubeconfigs/NAME.kubeconfig   each component's identity (identities.py)
    DATA_DIR/metrics-token                             a bearer token that may read every /metrics
    DATA_DIR/controller/                               `tessera controller`: log, address file,
                                                       webhook/ (its webhook's CA and certificate),
                                                       a 30 s quota reclaim grace
    DATA_DIR/kube-controller-manager/                  `tessera kube-controller-manager` (the
                                                       workload controllers): log, address file
    DATA_DIR/scheduler/                                `tessera scheduler`: log, address file,
                                                       config.yaml (its profiles, ElasticQuota on)
    DATA_DIR/descheduler/                              `tessera descheduler`: log, address file;
                                                       defragments through the scheduler's gRPC
    DATA_DIR/dashboard/                                `tessera dashboard`: log, address file
    DATA_DIR/agents/NODE/                              one `tessera agent` per node: log, address
                                                       file, state/ (its --state-dir), hook socket
                                                       (this machine's agent), dra/ (its kubelet
                                                       DRA plugin: registry/, plugin/, cdi/)
    DATA_DIR/prometheus/                               with `--prometheus`: Prometheus' log,
                                                       address, prometheus.yml, targets/, data/

Every component talks to the API server through its own kubeconfig (its ServiceAccount's token),
as in a cluster; each serves
HTTP on a port it picks itself and writes the address to its directory, so nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent.dra import PLUGIN_SOCKET, registration_socket
from apis.extension import names
from cli.launchers.agent import AgentProcess
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.controller import ControllerProcess
from cli.launchers.dashboard import DashboardProcess
from cli.launchers.descheduler import DeschedulerProcess
from cli.launchers.kubecontrollers import KubeControllersProcess
from cli.launchers.prometheus import PrometheusProcess
from cli.launchers.scheduler import SchedulerProcess
from cli.localcluster.state import ComponentState
from kube.process import ServingProcess
from scheduler.framework.config import KUBE_DEFAULT_SCHEDULER

__all__ = [
    "Component",
    "admin_token_file",
    "apiserver",
    "controller",
    "dashboard",
    "descheduler",
    "dra_flags",
    "kube_controller_manager",
    "local_agent",
    "metrics_token_file",
    "prometheus",
    "scheduler",
    "simulated_agent",
    "token_file",
]

#: A unix socket path must fit in 108 bytes (with its terminating NUL).
_MAX_SOCKET_PATH: Final = 100
#: On a node of its own each agent would have the whole machine; here they share it, and node
#: QoS would have them fight over this machine's cgroups. docs/agent.md#node-qos. Every agent
#: publishes its devices as DRA ResourceSlices: Tessera's scheduler is the only one here.
_AGENT_FLAGS: Final = ("--simulate-kubelet", "--qos", "off", "--dra")
#: There is no kube-scheduler here: without a profile for `default-scheduler` (what the API
#: server fills in when a pod names no scheduler), such pods would stay Pending with no Event.
#: Koordinator's manuals name `koord-scheduler`: served too, so they run verbatim.
_SCHEDULER_CONFIG: Final = f"""\
# Written by `tessera up`: pods that name no scheduler get {KUBE_DEFAULT_SCHEDULER}, and there
# is no kube-scheduler in this cluster; Koordinator's examples name {names.KOORD_SCHEDULER_NAME}.
# This scheduler serves all three names, alike.
profiles:
"""
#: The schedulerNames `tessera up`'s scheduler serves, each with the same profile.
SERVED_SCHEDULER_NAMES: Final = (names.SCHEDULER_NAME, names.KOORD_SCHEDULER_NAME, KUBE_DEFAULT_SCHEDULER)
#: Nothing else schedules here: a pod naming a scheduler none of those names serves is told so
#: after 2 s, not the 30 s a real cluster's kube-scheduler is given to bind its own pods first.
UNSERVED_NAME_GRACE: Final = 2
#: A borrowing quota gives back after 30 s here, not 120 s: the demo shows reclaim while one waits.
QUOTA_RECLAIM_GRACE: Final = 30
#: A whole-GPU pod pending this long gets a defragmentation plan here (a cluster's default is
#: 30 s): the demo shows the migrations while one waits.
DEFRAG_MIN_PENDING: Final = 10


def _scheduler_config(plugins: Sequence[str]) -> str:
    """The profiles of `SERVED_SCHEDULER_NAMES`, each also enabling the opt-in `plugins`
    (ElasticQuota) when given."""
    enabled = ", ".join(f"{{name: {name}}}" for name in plugins)
    extra = f"\n    plugins:\n      multiPoint:\n        enabled: [{enabled}]" if plugins else ""
    return _SCHEDULER_CONFIG + "".join(f"  - schedulerName: {profile}{extra}\n" for profile in SERVED_SCHEDULER_NAMES)


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


def metrics_token_file(data_dir: Path) -> Path:
    """A token that may `get /metrics` of every component and nothing else, for a Prometheus's
    `authorization.credentials_file` (identities.METRICS_SCRAPER)."""
    return data_dir / "metrics-token"


def prometheus(data_dir: Path, *, config: Path) -> Component:
    """Prometheus (`--prometheus`) with `config` (cli/localcluster/monitoring.py writes it)."""
    return Component("prometheus", "prometheus", PrometheusProcess(data_dir / "prometheus", config=config))


def admin_token_file(data_dir: Path) -> Path:
    """Your token (cluster-admin), as the API server reads it and your kubeconfig carries it."""
    return data_dir / "token"


def token_file(data_dir: Path) -> Path:
    """The components' tokens (kube's static token file; `identities.ensure_tokens` writes it)."""
    return data_dir / "tokens.csv"


def apiserver(data_dir: Path, *, port: int) -> Component:
    """The embedded API server over HTTPS with a bearer token (the user's, cluster-admin) and the
    components' tokens, objects in `DATA_DIR/db`."""
    server = EmbeddedAPIServer(data_dir, secure=True, extra_args=["--token-auth-file", str(token_file(data_dir))])
    server.port = port  # 0: a free one, kept for its restarts (the others' kubeconfig stays valid)
    return Component("apiserver", "apiserver", server)


def controller(data_dir: Path, kubeconfig: Path, *, args: Sequence[str] = ()) -> Component:
    """`args`: its webhook's flags (cli/localcluster/webhook.py); the quota reclaim grace is added."""
    args = ["--quota-reclaim-grace", str(QUOTA_RECLAIM_GRACE), *args]
    process = ControllerProcess(kubeconfig, directory=data_dir / "controller", args=args)
    return Component("controller", "controller", process)


def kube_controller_manager(data_dir: Path, kubeconfig: Path, *, args: Sequence[str] = ()) -> Component:
    """The workload controllers (Deployments, ReplicaSets, StatefulSets, Jobs, budgets, garbage
    collection, node lifecycle): kube-controller-manager's job, which a real cluster does itself."""
    process = KubeControllersProcess(kubeconfig, directory=data_dir / "kube-controller-manager", args=args)
    return Component("kube-controller-manager", "kube-controller-manager", process)


def scheduler(data_dir: Path, kubeconfig: Path, *, grpc_address: str, plugins: Sequence[str] = ()) -> Component:
    """`tessera scheduler` with profiles for `tessera-scheduler`, `koord-scheduler` and `default-scheduler`
    (`DATA_DIR/scheduler/config.yaml`, rewritten on every start), each also enabling the opt-in
    `plugins` (`UpSettings.scheduler_plugins`: ElasticQuota)."""
    directory = data_dir / "scheduler"
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "config.yaml"
    config.write_text(_scheduler_config(plugins), encoding="utf-8")
    args = ["--config", str(config), "--unserved-name-grace", str(UNSERVED_NAME_GRACE)]
    process = SchedulerProcess(kubeconfig, directory, grpc_address=grpc_address, extra_args=args)
    return Component("scheduler", "scheduler", process)


def dashboard(data_dir: Path, kubeconfig: Path, *, scheduler: Component) -> Component:
    """The web UI, asking `scheduler` for pending pods' reasons (gRPC) and its health (its
    metrics, found through its address file: a restarted scheduler serves on a new port)."""
    process = scheduler.process
    address_file = process.address_file if isinstance(process, ServingProcess) else None
    dash = DashboardProcess(
        kubeconfig,
        directory=data_dir / "dashboard",
        scheduler=scheduler.state(0).grpc or "none",
        scheduler_address_file=address_file,
    )
    return Component("dashboard", "dashboard", dash)


def descheduler(data_dir: Path, kubeconfig: Path, *, scheduler: Component) -> Component:
    """`tessera descheduler`: runs PodMigrationJobs and defragments GPUs, asking `scheduler`'s
    PlanMigrations over its gRPC address (none: defragmentation off)."""
    grpc = scheduler.state(0).grpc
    args = ["--defrag-min-pending", str(DEFRAG_MIN_PENDING), "--defrag-interval", "5"]
    if grpc:
        args = ["--scheduler-address", grpc, *args]
    process = DeschedulerProcess(kubeconfig, directory=data_dir / "descheduler", args=args)
    return Component("descheduler", "descheduler", process)


def dra_flags(directory: Path) -> list[str]:
    """The kubelet DRA plugin of the agent in `directory`, with kubelet's directories in its own
    `dra/` (its simulated kubelet finds the plugin in the same registry directory); none when a
    socket path there would be too long for a unix socket (pods with claims then stay Pending,
    their Event saying the driver is not registered)."""
    dra = directory / "dra"
    registry, plugin = dra / "registry", dra / "plugin"
    if (
        len(str(registration_socket(registry))) > _MAX_SOCKET_PATH
        or len(str(plugin / PLUGIN_SOCKET)) > _MAX_SOCKET_PATH
    ):
        return []
    return [
        "--dra-plugin",
        *("--kubelet-registry-dir", str(registry)),
        *("--dra-plugin-dir", str(plugin)),
        *("--cdi-dir", str(dra / "cdi")),
    ]


def simulated_agent(
    data_dir: Path, kubeconfig: Path, *, node: str, profile: str, args: Sequence[str] = ()
) -> Component:
    """A node with simulated devices; nothing calls hooks on it, so it serves none; it is the
    DRA driver of its GPUs to its simulated kubelet. `args`: more flags."""
    directory = data_dir / "agents" / node
    process = AgentProcess(
        kubeconfig,
        node_name=node,
        directory=directory,
        args=[*_AGENT_FLAGS, "--simulate-devices", profile, "--no-hook-server", *dra_flags(directory), *args],
    )
    return Component(f"agent/{node}", f"agent {node}: simulated {profile}", process, node=node)


def local_agent(data_dir: Path, kubeconfig: Path, *, node: str) -> Component:
    """This machine, with real discovery. Its hook server listens in its directory (for a runtime
    proxy to be pointed at), unless that path is too long for a unix socket."""
    directory = data_dir / "agents" / node
    hooks = [] if len(str(directory / "agent.sock")) <= _MAX_SOCKET_PATH else ["--no-hook-server"]
    args = [*_AGENT_FLAGS, *hooks, *dra_flags(directory)]
    process = AgentProcess(kubeconfig, node_name=node, directory=directory, args=args)
    return Component(f"agent/{node}", f"agent {node}: this machine", process, node=node)
