"""The controller's admission webhooks, under Koordinator's names: ElasticQuota validation
(`velasticquota.koordinator.sh`) and the quota rules of pod validation (`vpod.koordinator.sh`),
served over HTTPS for kube-apiserver — or the embedded API server — to call.
`deploy/controller-webhook.yaml` registers them in a cluster; `tessera up` registers them in its
own (cli/localcluster/webhook.py).
"""

from __future__ import annotations

import logging

from apis.crds.elasticquota import ElasticQuota
from apis.errors import TesseraError
from apis.extension import names
from apis.k8s.core import Pod
from apis.quota import QuotaSpec, resolve_quota
from controller.runtime import Manager
from controller.runtime.malformed import Malformed, tolerant
from controller.webhook.quota import quota_specs
from controller.webhook.server import POD_PATH, POD_WEBHOOK, QUOTA_PATH, QUOTA_WEBHOOK, WebhookServer
from controller.webhook.settings import WebhookSettings
from kube import errors
from kube.resources import PODS

__all__ = ["POD_PATH", "POD_WEBHOOK", "QUOTA_PATH", "QUOTA_WEBHOOK", "WebhookServer", "WebhookSettings", "for_manager"]

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

    pods = manager.client.resource(PODS)

    def has_pods(spec: QuotaSpec) -> bool:
        """Whether pods use the quota now (asked only when an update makes it a parent): those
        labelled with its name, and those of the namespaces it may claim, whose quota it is."""
        specs, _ = quota_specs(quotas())
        candidates = pods.list_all(label_selector=f"{names.LABEL_QUOTA_NAME}={spec.name}").items
        for namespace in (spec.name, *spec.namespaces):
            candidates += pods.list_all(namespace=namespace).items
        for raw in candidates:
            try:
                pod = Pod.from_dict(raw)
            except TesseraError:
                continue
            if resolve_quota(pod, {**specs, spec.name: spec}) == spec.name:
                return True
        return False

    def cached() -> list[ElasticQuota]:
        """The informer's quotas: every pod write asks the pod webhook, which must not list the
        quotas each time; a quota made a moment ago is checked by the scheduler anyway."""
        return [q for q in informer.store.list() if not isinstance(q, Malformed)]

    return WebhookServer(
        settings,
        quotas=quotas,
        cached_quotas=cached,
        synced=lambda: informer.has_synced,
        registry=manager.metrics.registry,
        has_pods=has_pods,
    )
