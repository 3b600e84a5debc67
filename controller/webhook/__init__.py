"""The controller's admission webhooks (today: ElasticQuota validation, Koordinator's
`velasticquota.koordinator.sh`), served over HTTPS for kube-apiserver — or the embedded API
server — to call. `deploy/controller-webhook.yaml` registers it in a cluster; `tessera up`
registers it in its own (cli/localcluster/webhook.py).
"""

from __future__ import annotations

import logging

from apis.crds.elasticquota import ElasticQuota
from apis.extension import names
from controller.runtime import Manager
from controller.runtime.malformed import Malformed, tolerant
from controller.webhook.server import QUOTA_PATH, QUOTA_WEBHOOK, WebhookServer
from controller.webhook.settings import WebhookSettings
from kube import errors

__all__ = ["QUOTA_PATH", "QUOTA_WEBHOOK", "WebhookServer", "WebhookSettings", "for_manager"]

log = logging.getLogger(__name__)


def for_manager(manager: Manager, settings: WebhookSettings) -> WebhookServer | None:
    """The webhook server of this controller manager (None when no certificate is configured),
    checking against the quotas the API server holds. Start it before `manager.run`."""
    if not settings.enabled:
        return None
    parse = tolerant(ElasticQuota.from_dict, names.ELASTIC_QUOTAS)
    informer = manager.informers.informer(names.ELASTIC_QUOTAS, parse=parse)
    api = manager.client.resource(names.ELASTIC_QUOTAS)

    def quotas() -> list[ElasticQuota]:
        """The quotas stored now, read from the API server: `kubectl apply -f tree.yaml` creates a
        parent and its children in one burst, and a cache a moment behind would check a child
        without its siblings. The informer's copy only when the read fails."""
        try:
            found = [parse(raw) for raw in api.list_all().items]
        except errors.APIError as e:
            log.warning("Reading ElasticQuotas failed; checking against the cache", extra={"error": str(e)})
            found = informer.store.list()
        return [q for q in found if not isinstance(q, Malformed)]

    return WebhookServer(settings, quotas=quotas, synced=lambda: informer.has_synced, registry=manager.metrics.registry)
