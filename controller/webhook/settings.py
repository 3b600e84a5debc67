"""`WebhookSettings`: where the controller serves its admission webhook, and with which certificate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from apis.errors import ConfigError

__all__ = ["WebhookSettings"]


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """Off unless a certificate is given: kube-apiserver calls webhooks over HTTPS only. In a
    cluster the files come from a mounted Secret (cert-manager's, or one made by hand); `tessera
    up` makes them (docs/user/deploy.md)."""

    host: str = "0.0.0.0"
    #: controller-runtime's default webhook port, which Koordinator's manifests use.
    port: int = 9443
    cert_file: Path | None = None
    key_file: Path | None = None

    @property
    def enabled(self) -> bool:
        return self.cert_file is not None

    def validate(self) -> None:
        """Raises ConfigError naming the first bad setting. The files are read when the server
        starts (a missing or unreadable one is a ConfigError then)."""
        if (self.cert_file is None) != (self.key_file is None):
            raise ConfigError("--webhook-cert-file and --webhook-key-file go together: give both or neither")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--webhook-bind-address port {self.port}: must be in 0..65535")
