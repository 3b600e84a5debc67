"""`KubeControllersSettings`: what `tessera kube-controller-manager` is configured with."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from apis.errors import ConfigError
from kube.client import ClientSettings

__all__ = ["KubeControllersSettings"]


@dataclass(frozen=True, slots=True)
class KubeControllersSettings:
    client: ClientSettings = field(default_factory=lambda: ClientSettings(user_agent="tessera-kube-controller-manager"))
    #: Address of /healthz, /readyz and /metrics (port 0: any free port).
    host: str = "127.0.0.1"
    port: int = 10257
    #: Write the bound HOST:PORT here once serving.
    address_file: Path | None = None
    #: Sync every object this often even without events (time-based rules: deadlines, minReadySeconds).
    resync_period: float = 30.0
    #: A failed Job pod's replacement waits this · 2^(failures-1) seconds (kube: 10 s), at most 6 minutes.
    job_backoff: float = 10.0
    #: A node whose kubelet renewed neither its Lease nor its Ready condition for this long is
    #: marked Unknown and tainted unreachable (kube: `--node-monitor-grace-period`, 40 s).
    node_monitor_grace_period: float = 40.0
    #: How often the node lifecycle controller looks at every node (kube: `--node-monitor-period`, 5 s).
    node_monitor_period: float = 5.0

    def validate(self) -> None:
        """Raises ConfigError naming the first bad setting."""
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--listen port {self.port}: must be in 0..65535")
        if self.resync_period <= 0:
            raise ConfigError(f"--resync-period {self.resync_period}: must be > 0 seconds")
        if self.job_backoff < 0:
            raise ConfigError(f"--job-backoff {self.job_backoff}: must be >= 0 seconds")
        if not 0 < self.node_monitor_period < self.node_monitor_grace_period:
            raise ConfigError(
                f"--node-monitor-period {self.node_monitor_period} and --node-monitor-grace-period "
                f"{self.node_monitor_grace_period}: the period must be > 0 seconds and shorter than the grace"
            )
