"""`ControllerSettings`: everything `tessera controller` is configured with, grouped by topic.

Built from flags by `cli/controller.py` (or by `tessera up` directly), validated before anything
starts, so a bad value is a ConfigError at start-up, never a failure later.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apis.errors import ConfigError
from controller.noderesources import NodeResourcesSettings
from controller.quotas import QuotaSettings
from controller.runtime import ManagerSettings
from controller.webhook import WebhookSettings
from kube.client import ClientSettings

__all__ = ["ControllerSettings"]


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    client: ClientSettings = field(default_factory=lambda: ClientSettings(user_agent="tessera-controller"))
    manager: ManagerSettings = field(default_factory=ManagerSettings)
    node_resources: NodeResourcesSettings = field(default_factory=NodeResourcesSettings)
    webhook: WebhookSettings = field(default_factory=WebhookSettings)
    quotas: QuotaSettings = field(default_factory=QuotaSettings)

    def validate(self) -> None:
        """Raises ConfigError naming the first bad setting."""
        self.manager.serving.validate()
        if self.manager.resync_period < 0:
            raise ConfigError(f"--resync-period {self.manager.resync_period}: must be >= 0 seconds")
        if self.manager.leader_election is not None:
            self.manager.leader_election.validate()
        self.node_resources.validate()
        self.webhook.validate()
        self.quotas.validate()
