"""`KubeControllersSettings`: what `tessera kube-controller-manager` is configured with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from apis.errors import ConfigError
from kube.client import ClientSettings
from kube.serving import ServingSettings

__all__ = ["DEFAULT_SERVING", "KubeControllersSettings"]

#: Where /healthz, /readyz and /metrics are served unless `--listen` says otherwise (loopback:
#: only `tessera up` runs it).
DEFAULT_SERVING: Final = ServingSettings(host="127.0.0.1", port=10257)


@dataclass(frozen=True, slots=True)
class KubeControllersSettings:
    client: ClientSettings = field(default_factory=lambda: ClientSettings(user_agent="tessera-kube-controller-manager"))
    #: Address of /healthz, /readyz and /metrics (`--listen`; port 0: any free port).
    serving: ServingSettings = DEFAULT_SERVING
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
        self.serving.validate()
        if self.resync_period <= 0:
            raise ConfigError(f"--resync-period {self.resync_period}: must be > 0 seconds")
        if self.job_backoff < 0:
            raise ConfigError(f"--job-backoff {self.job_backoff}: must be >= 0 seconds")
        if not 0 < self.node_monitor_period < self.node_monitor_grace_period:
            raise ConfigError(
                f"--node-monitor-period {self.node_monitor_period} and --node-monitor-grace-period "
                f"{self.node_monitor_grace_period}: the period must be > 0 seconds and shorter than the grace"
            )
