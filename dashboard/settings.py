"""What `tessera dashboard` is asked to do: its flags as one value, checked before it starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from apis.errors import ConfigError
from kube.client import ClientSettings
from kube.servingtls import TLSServing

__all__ = ["DEFAULT_PORT", "DashboardSettings"]

#: The port `tessera dashboard` serves on unless told (`tessera up` asks for a free one).
DEFAULT_PORT: Final = 8790


@dataclass(frozen=True, slots=True)
class DashboardSettings:
    client: ClientSettings = field(default_factory=lambda: ClientSettings(user_agent="tessera-dashboard"))
    #: Loopback by default: the page shows what the kubeconfig's user may read, to anyone who
    #: reaches the port, so exposing it is an explicit choice.
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    #: Where to write the bound HOST:PORT once serving (port 0 picks one).
    address_file: Path | None = None
    #: The scheduler's gRPC target (`unix:///…`, `host:port`); "" shows no explanations.
    scheduler_target: str = ""
    #: The scheduler's Prometheus endpoint (`http://127.0.0.1:10251/metrics`); "" shows no health.
    scheduler_metrics_url: str = ""
    #: An `https://` endpoint with a certificate nothing here can verify (the scheduler's
    #: self-signed one, deploy/): encrypt, without verifying it.
    scheduler_metrics_insecure: bool = False
    #: Or the file where the scheduler writes its HTTP `HOST:PORT` (`--http-address-file`), read
    #: again at every scrape: a scheduler restarted on another port is still found.
    scheduler_address_file: Path | None = None
    #: Seconds between questions to the scheduler (pending pods, explanations, metrics).
    poll_interval: float = 1.0
    #: Pending pods explained per poll, oldest first (each is one Explain call).
    explain_limit: int = 20
    #: Seconds changes are gathered before the page is told: one update per burst, not per event.
    debounce: float = 0.1
    #: Seconds between the comments that keep an idle event stream (and proxies on its way) open.
    keepalive: float = 15.0
    #: Host names the page may be reached by besides IP addresses, localhost, Service names and
    #: this machine's name (`kube.hostcheck`): any other is refused, so a page elsewhere cannot
    #: rebind its own name to this server and read it.
    allowed_hosts: tuple[str, ...] = ()
    #: HTTPS for the page (`--tls-cert-file`, `--tls-self-signed`); plain HTTP by default.
    tls: TLSServing = field(default_factory=TLSServing)

    def validate(self) -> None:
        """Raise ConfigError naming every problem at once."""
        problems = []
        if not 0 <= self.port <= 65535:
            problems.append(f"--listen port {self.port}: must be between 0 and 65535")
        if not 0 < self.poll_interval <= 3600:
            problems.append(f"--poll-interval {self.poll_interval:g}: must be above 0 and at most 3600 seconds")
        if self.explain_limit < 0:
            problems.append(f"--explain-limit {self.explain_limit}: must not be negative")
        if self.scheduler_metrics_url and not self.scheduler_metrics_url.startswith(("http://", "https://")):
            problems.append(f"--scheduler-metrics {self.scheduler_metrics_url!r}: must be an http(s) URL")
        if self.scheduler_metrics_url and self.scheduler_address_file is not None:
            problems.append("--scheduler-metrics and --scheduler-address-file: give one, not both")
        if problems:
            raise ConfigError("; ".join(problems))
