"""The controller's HTTPS admission-webhook server: one route per webhook (ElasticQuota
validation, and the quota rules of Koordinator's pod webhook), answers from the informer.

It serves on every replica, leader or not (it only reads), as soon as the process starts; until
the ElasticQuota informer has synced it answers 503, which kube-apiserver treats as a failed call
(the configuration's failurePolicy Fail refuses the write): deciding on an empty cache would
accept quotas that break the tree. A malformed AdmissionReview is a 400; a bug is a 500 (the
server goes on). The certificate files are watched, as controller-runtime's certwatcher does: a
new connection after cert-manager renewed the Secret (kubelet updates the mounted files) gets the
new certificate; files that do not load are logged and the previous certificate kept.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from apis.crds.elasticquota import ElasticQuota
from apis.errors import ConfigError
from apis.quota import QuotaSpec
from controller.webhook import pod, quota
from controller.webhook.settings import WebhookSettings
from kube import serving

__all__ = ["POD_PATH", "POD_WEBHOOK", "QUOTA_PATH", "QUOTA_WEBHOOK", "WebhookServer"]

log = logging.getLogger(__name__)

#: Koordinator's path and webhook name for ElasticQuota validation (its kubebuilder marker).
QUOTA_PATH = "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
QUOTA_WEBHOOK = "velasticquota.koordinator.sh"
#: Koordinator's path and webhook name for pod validation.
POD_PATH = "/validate-pod"
POD_WEBHOOK = "vpod.koordinator.sh"
#: An AdmissionReview carries two objects; kube-apiserver's own limit on one is 3 MiB.
_MAX_REVIEW = 8 * 1024 * 1024


class Certificate:
    """The serving certificate and key files, reloaded when either changes. Thread-safe."""

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        """Raises ConfigError when the files do not load now."""
        self._files = (cert_file, key_file)
        self._lock = threading.Lock()
        try:
            self._stamp = self._stamp_now()
            self._context = self._load()
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"webhook certificate {cert_file} / {key_file}: {e}") from e

    def _stamp_now(self) -> tuple[int, ...]:
        return tuple(v for path in self._files for v in (path.stat().st_mtime_ns, path.stat().st_size))

    def _load(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*self._files)
        return context

    def context(self) -> ssl.SSLContext:
        """The context for a new connection: the files' current certificate."""
        with self._lock:
            try:
                stamp = self._stamp_now()
                if stamp != self._stamp:
                    self._context, self._stamp = self._load(), stamp
                    log.info("Reloaded the webhook certificate", extra={"cert": str(self._files[0])})
            except (OSError, ssl.SSLError) as e:
                log.warning(
                    "Webhook certificate does not load; serving the previous one",
                    extra={"cert": str(self._files[0]), "reason": str(e)},
                )
            return self._context


class WebhookServer:
    def __init__(
        self,
        settings: WebhookSettings,
        *,
        quotas: Callable[[], Iterable[ElasticQuota]],
        synced: Callable[[], bool],
        registry: CollectorRegistry,
        has_pods: Callable[[QuotaSpec], bool] = lambda _: False,
        cached_quotas: Callable[[], Iterable[ElasticQuota]] | None = None,
    ) -> None:
        """`quotas`: the ElasticQuotas stored now (quota reviews); `cached_quotas`: a cached
        copy, cheap to read (pod reviews; `quotas` when None); `synced`: whether that list is
        complete; `has_pods(quota)`: whether pods use the quota now."""
        assert settings.cert_file is not None and settings.key_file is not None
        certificate = Certificate(settings.cert_file, settings.key_file)
        self._quotas = quotas
        self._cached_quotas = cached_quotas or quotas
        self._synced = synced
        self._has_pods = has_pods
        self._reviews = Counter(
            "tessera_controller_webhook_reviews_total",
            "AdmissionReviews answered, by webhook, operation and whether the request was allowed.",
            ["webhook", "operation", "allowed"],
            registry=registry,
        )
        self._server = serving.Server(
            "controller webhook",
            host=settings.host,
            port=settings.port,
            registry=registry,
            routes=[
                serving.Route("POST", QUOTA_PATH, self._validate_quota),
                serving.Route("POST", POD_PATH, self._validate_pod),
            ],
            tls=certificate.context,
            max_body=_MAX_REVIEW,
        )

    @property
    def port(self) -> int:
        return self._server.port

    def start(self) -> None:
        """Bind and serve; raises ConfigError when the address cannot be bound."""
        self._server.start()

    def stop(self) -> None:
        self._server.stop()

    def _validate_quota(self, request: serving.Request) -> serving.Response:
        return self._validate(
            request, QUOTA_WEBHOOK, lambda review: quota.review(review, self._quotas(), has_pods=self._has_pods)
        )

    def _validate_pod(self, request: serving.Request) -> serving.Response:
        return self._validate(
            request, POD_WEBHOOK, lambda review: pod.review(review, self._cached_quotas(), fresh=self._quotas)
        )

    def _validate(
        self, request: serving.Request, webhook: str, decide: Callable[[dict[str, Any]], quota.Decision]
    ) -> serving.Response:
        if not self._synced():
            return serving.Response.text("the ElasticQuota cache has not synced yet", 503)
        try:
            doc = json.loads(request.body)
            review = doc["request"]
            uid = str(review["uid"])
            api_version = str(doc["apiVersion"])
        except (ValueError, KeyError, TypeError) as e:
            return serving.Response.text(f"not an AdmissionReview: {type(e).__name__}: {e}", 400)
        decision = decide(review)
        operation = str(review.get("operation", ""))
        self._reviews.labels(webhook, operation, str(decision.allowed).lower()).inc()
        if not decision.allowed:
            log.info(
                "Refused a write",
                extra={
                    "webhook": webhook,
                    "operation": operation,
                    "object": f"{review.get('namespace', '')}/{review.get('name', '')}",
                    "user": (review.get("userInfo") or {}).get("username", ""),
                    "reason": decision.message,
                },
            )
        body = {"apiVersion": api_version, "kind": "AdmissionReview", "response": decision.response(uid)}
        return serving.Response.json(body)
