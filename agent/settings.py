"""What `tessera agent` is told to do, as dataclasses grouped by topic: `AgentSettings`.

`cli/agent.py` turns flags into these; `agent.run(settings)` reads nothing else. Each group
carries its defaults, so tests build `AgentSettings(DiscoverySettings(node_name=...), client=...)`
and override only what they exercise. Settings are plain values: validation that needs the
machine (a readable profile, a free socket) happens when the agent starts.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent.discovery.settings import DiscoverySettings
from agent.dra import DEFAULT_CDI_DIR, DEFAULT_PLUGIN_DIR, DEFAULT_REGISTRY_DIR
from agent.hooks import DEFAULT_SOCKET
from agent.hooks.hamicore import HAMiCore
from apis.extension.partitions import PartitionPolicy
from apis.k8s.core import Taint
from kube.client import ClientSettings
from kube.servingtls import TLSServing

__all__ = [
    "DEFAULT_STATE_DIR",
    "AgentSettings",
    "DRASettings",
    "HealthSettings",
    "HookSettings",
    "KubeletSettings",
    "MetricsSettings",
    "QoSMode",
    "QoSSettings",
    "ReportSettings",
]

#: Where the agent keeps what must survive its restarts (a hostPath in a DaemonSet).
DEFAULT_STATE_DIR = Path("/var/lib/tessera/agent")


@dataclass(frozen=True, slots=True)
class HealthSettings:
    #: Seconds between health probes (GPU liveness, RDMA ports); XIDs are seen as they come.
    interval_s: float = 1.0
    #: Seconds without an error before an unhealthy device counts as healthy again.
    quiet_period_s: float = 300.0


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    """The agent's HTTP endpoint: /metrics, /healthz and (simulated devices only) /debug/simulate/."""

    host: str = "0.0.0.0"
    #: 9316 is koordlet's metrics port; 0 picks a free one (see `address_file`).
    port: int = 9316
    #: Seconds between GPU readings.
    interval_s: float = 10.0
    #: Where to write `host:port` once serving (for `tessera up` and tests that start on port 0).
    address_file: Path | None = None
    #: The host's /proc, to map GPU processes to containers (the host's /proc in a DaemonSet pod).
    proc_root: Path = Path("/proc")
    #: HTTPS (`--tls-cert-file`, `--tls-self-signed`): callers send bearer tokens over the node's network.
    tls: TLSServing = field(default_factory=TLSServing)


@dataclass(frozen=True, slots=True)
class ReportSettings:
    #: Seconds between discovery passes (new or vanished devices).
    discovery_interval_s: float = 60.0
    #: Seconds between full re-reads of the Device CR and the Node (someone else's edits, a
    #: deleted CR, a re-created Node); health changes are pushed at once regardless.
    resync_interval_s: float = 60.0
    #: The `gpu-partition-policy` label written with a GPU partition table (agent/devices/partitions.py).
    gpu_partition_policy: PartitionPolicy = PartitionPolicy.PREFER
    #: Publish the node's GPUs and RDMA NICs as DRA ResourceSlices too (`--dra`). Off unless
    #: asked: with slices published, any DRA scheduler may allocate the GPUs, and only Tessera's
    #: counts Koordinator-protocol pods' shares beside claims (docs/agent.md).
    dra: bool = False


@dataclass(frozen=True, slots=True)
class HookSettings:
    """The RuntimeHookService the runtime proxy calls (GPU env, RDMA devices, QoS)."""

    enabled: bool = True
    socket_path: Path = DEFAULT_SOCKET
    #: Where the RDMA device nodes are (`<dev_root>/infiniband/uverbsN`).
    dev_root: Path = Path("/dev")
    #: GPU isolation by HAMi-core (agent/hooks/hamicore.py): where its library and lock directory
    #: are on the host, and whether HAMi's vGPU monitor is fed. Discovery looks for the library
    #: there too, to label the node.
    hami_core: HAMiCore = field(default_factory=HAMiCore)


class QoSMode(enum.Enum):
    #: On with real devices, off with simulated ones (simulated nodes share this machine's cgroups).
    AUTO = "auto"
    ON = "on"
    OFF = "off"


@dataclass(frozen=True, slots=True)
class QoSSettings:
    """Node QoS. What runs is decided by the NodeSLO (the node's NodeSLO object, else the file at
    `config_path`, else Koordinator's defaults): everything is off until it enables it."""

    mode: QoSMode = QoSMode.AUTO
    #: A NodeSLO / slo-controller ConfigMap YAML file, used while the node has no NodeSLO object;
    #: None: Koordinator's defaults (all off) then.
    config_path: Path | None = None
    #: kubelet's --cgroup-root, relative to the cgroup mounts.
    cgroup_root: str = ""
    reconcile_interval_s: float = 10.0
    #: Egress interface for network QoS; without it network QoS stays off.
    network_interface: str = ""
    #: Seconds between checks of `config_path` for changes.
    config_poll_s: float = 10.0
    #: Seconds the agent waits at start-up for the API server to list the node's NodeSLO object,
    #: so the first QoS decision includes it; after that it starts from the file or the defaults
    #: and applies the object when it comes.
    nodeslo_sync_timeout_s: float = 5.0


@dataclass(frozen=True, slots=True)
class KubeletSettings:
    """The simulated kubelet (`--simulate-kubelet`), for nodes without a real one (`tessera up`)."""

    enabled: bool = False
    #: Seconds between renewals of the node's Lease in kube-node-lease (kubelet: 10 s).
    lease_renew_s: float = 10.0
    #: Seconds between Node status reports (Ready condition heartbeat, capacity).
    status_report_s: float = 60.0
    #: The node's InternalIP; "" derives a stable fake one from the node name.
    node_ip: str = ""
    #: Taints and labels the Node is registered with (kubelet's --register-with-taints and
    #: --node-labels): a node that must take only some pods is tainted from its first moment,
    #: never after pods already went there.
    taints: tuple[Taint, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DRASettings:
    """kubelet's DRA plugin for `gpu.tessera.dev` (`--dra-plugin`; agent/dra/)."""

    enabled: bool = False
    #: kubelet's plugins_registry directory, where the registration socket goes.
    registry_dir: Path = DEFAULT_REGISTRY_DIR
    #: Where the plugin's own socket (`dra.sock`) goes.
    plugin_dir: Path = DEFAULT_PLUGIN_DIR
    #: Where the prepared claims' CDI specs go (a directory the container runtime reads).
    cdi_dir: Path = DEFAULT_CDI_DIR


@dataclass(frozen=True, slots=True)
class AgentSettings:
    #: Which node this agent is (its `node_name`) and how it finds devices.
    discovery: DiscoverySettings
    client: ClientSettings = field(default_factory=ClientSettings)
    health: HealthSettings = field(default_factory=HealthSettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    report: ReportSettings = field(default_factory=ReportSettings)
    hooks: HookSettings = field(default_factory=HookSettings)
    qos: QoSSettings = field(default_factory=QoSSettings)
    kubelet: KubeletSettings = field(default_factory=KubeletSettings)
    dra: DRASettings = field(default_factory=DRASettings)
    #: What must outlive the process: the GPU faults that wait for a reset (agent/health/memory.py)
    #: and the DRA plugin's prepared claims (agent/dra/prepared.py).
    state_dir: Path = DEFAULT_STATE_DIR

    @property
    def node_name(self) -> str:
        return self.discovery.node_name

    @property
    def simulated(self) -> bool:
        """Devices come from a simulated profile."""
        return bool(self.discovery.simulate)
