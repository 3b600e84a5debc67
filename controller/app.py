"""`controller.run(settings)`: the controller manager process, from settings to clean exit.

Connects to the API server, builds the manager with every controller Tessera has (today: node
device resources, PodGroup status, ElasticQuota status and reclaim) and the admission webhook
server (when given a certificate), and runs until SIGTERM or SIGINT, then shuts down cleanly (see
`controller.runtime.manager`). `tessera controller` and `tessera up` call it.
"""

from __future__ import annotations

import logging
import threading

from controller import noderesources, podgroups, quotas, webhook
from controller.runtime import Manager
from controller.settings import ControllerSettings
from kube.client import Client
from kube.lifecycle import stop_on_signals

__all__ = ["run"]

log = logging.getLogger(__name__)


def run(settings: ControllerSettings, *, stop: threading.Event | None = None) -> int:
    """Run until `stop` is set (None: until SIGTERM/SIGINT, in the main thread). Returns 0.

    Raises ConfigError for bad settings, a client that cannot be configured or an HTTP port that
    is taken.
    """
    settings.validate()
    with Client.from_settings(settings.client) as client:
        manager = Manager(client, settings.manager)
        noderesources.add_to_manager(manager, settings.node_resources)
        podgroups.add_to_manager(manager)
        webhooks = webhook.for_manager(manager, settings.webhook)
        quotas.add_to_manager(manager, settings.quotas)
        election = settings.manager.leader_election
        log.info(
            "Starting the controller manager",
            extra={
                "server": client.host,
                "controllers": ",".join(c.name for c in manager.controllers),
                "leaderElection": f"{election.namespace}/{election.lease_name}" if election else "off",
                "identity": election.identity if election else "",
            },
        )
        if webhooks is not None:
            webhooks.start()
        try:
            if stop is not None:
                manager.run(stop)
            else:
                with stop_on_signals() as signalled:
                    manager.run(signalled)
        finally:
            if webhooks is not None:
                webhooks.stop()
    return 0
