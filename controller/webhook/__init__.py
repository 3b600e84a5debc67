"""The controller's admission webhooks (today: ElasticQuota validation, Koordinator's
`velasticquota.koordinator.sh`), served over HTTPS for kube-apiserver — or the embedded API
server — to call. `deploy/controller-webhook.yaml` registers it in a cluster; `tessera up`
registers it in its own (cli/localcluster/webhook.py).
"""

from __future__ import annotations

from apis.crds.elasticquota import ElasticQuota
from apis.extension import names
from controller.runtime import Manager
from controller.runtime.malformed import Malformed, tolerant
from controller.webhook.server import QUOTA_PATH, QUOTA_WEBHOOK, WebhookServer
from controller.webhook.settings import WebhookSettings

__all__ = ["QUOTA_PATH", "QUOTA_WEBHOOK", "WebhookServer", "WebhookSettings", "for_manager"]


def for_manager(manager: Manager, settings: WebhookSettings) -> WebhookServer | None:
    """The webhook server of this controller manager (None when no certificate is configured),
    reading quotas from the manager's shared informers. Start it before `manager.run`."""
    if not settings.enabled:
        return None
    parse = tolerant(ElasticQuota.from_dict, names.ELASTIC_QUOTAS)
    informer = manager.informers.informer(names.ELASTIC_QUOTAS, parse=parse)

    def quotas() -> list[ElasticQuota]:
        return [q for q in informer.store.list() if not isinstance(q, Malformed)]

    return WebhookServer(settings, quotas=quotas, synced=lambda: informer.has_synced, registry=manager.metrics.registry)
