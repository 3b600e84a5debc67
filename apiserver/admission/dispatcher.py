"""`Admission`: the validating admission step of the write path, as kube-apiserver's.

The registry asks `review(...)` once per write, after defaulting and validation and before
storage. A node's write first goes through NodeRestriction (`noderestriction.py`, built in and
synchronous: a refusal is raised at once). Without a matching webhook it returns None at once
(no await, so writes nothing watches stay as fast as before); otherwise an awaitable that calls
every matching webhook concurrently and raises the first refusal, in configuration order: a
denial as the webhook spelled it, a call failure as a 500 when the webhook's failurePolicy is
Fail (logged and ignored when Ignore).

Webhooks on `admissionregistration.k8s.io` objects are never called, as in kube-apiserver, so a
broken webhook can always be removed. The configurations come from the store through
`WebhookConfigurationStrategy` (strategy.py), parsed once when stored.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Mapping
from contextvars import ContextVar
from typing import Any

from apiserver.admission import noderestriction
from apiserver.admission import review as reviews
from apiserver.admission.caller import Lookup, Sessions, post
from apiserver.admission.config import Webhook
from apiserver.admission.matching import Attributes, matched_version, selectors_match
from apiserver.authz.identity import ANONYMOUS, User, node_name
from apiserver.catalog import Catalog, ResourceType
from apiserver.errors import StatusError
from apiserver.metrics import APIServerMetrics

__all__ = ["ANONYMOUS", "USER", "Admission"]

log = logging.getLogger(__name__)

GROUP = "admissionregistration.k8s.io"
#: The user of the request being served (set per request by the server's authentication).
USER: ContextVar[User] = ContextVar("tessera_admission_user", default=ANONYMOUS)


class Admission:
    def __init__(self, catalog: Catalog, metrics: APIServerMetrics | None = None) -> None:
        self._catalog = catalog
        self._metrics = metrics or APIServerMetrics()
        self._lookup: Lookup = lambda storage_id, namespace, name: None
        self._configurations: dict[str, tuple[Webhook, ...]] = {}
        self._webhooks: tuple[Webhook, ...] = ()
        self._sessions = Sessions()

    async def close(self) -> None:
        """Close the connections to webhooks (server shutdown)."""
        await self._sessions.close()

    def bind(self, lookup: Lookup) -> None:
        """Where stored objects are read from (namespaces, services, endpoints): the registry,
        which is built after this (it needs the strategies, which need this)."""
        self._lookup = lookup

    # --- the configurations (from the store) -------------------------------------------------------
    def set_configuration(self, name: str, webhooks: tuple[Webhook, ...]) -> None:
        self._configurations[name] = webhooks
        self._rebuild()

    def remove_configuration(self, name: str) -> None:
        self._configurations.pop(name, None)
        self._rebuild()

    def _rebuild(self) -> None:
        self._webhooks = tuple(w for name in sorted(self._configurations) for w in self._configurations[name])

    @property
    def webhooks(self) -> tuple[Webhook, ...]:
        return self._webhooks

    # --- the write path ----------------------------------------------------------------------------
    def review(
        self,
        *,
        operation: str,
        rt: ResourceType,
        namespace: str,
        name: str,
        obj: Mapping[str, Any] | None,
        old: Mapping[str, Any] | None,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Awaitable[None] | None:
        """None when no webhook wants this write; else what to await before storing it (raises
        StatusError when a webhook refuses). Raises StatusError at once when NodeRestriction
        refuses a node's write."""
        user = USER.get()
        by_node = node_name(user) is not None
        webhooks = bool(self._webhooks) and rt.group != GROUP
        if not by_node and not webhooks:
            return None
        attrs = Attributes(
            operation,
            rt.group,
            rt.version,
            rt.plural,
            rt.kind,
            namespace,
            name,
            obj,
            old,
            subresource,
            dry_run,
            user,
            tuple(t.version for t in self._catalog.all() if t.storage_id == rt.storage_id),
        )
        if by_node:
            noderestriction.admit(attrs)
        if not webhooks:
            return None
        calls = [
            (webhook, version)
            for webhook in self._webhooks
            if (version := matched_version(webhook, attrs)) is not None
            and selectors_match(webhook, attrs, self._namespace_labels)
        ]
        return self._call_all(attrs, calls) if calls else None

    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        ns = self._lookup("namespaces", "", namespace) or {}
        labels = (ns.get("metadata") or {}).get("labels")
        return labels if isinstance(labels, Mapping) else {}

    async def _call_all(self, attrs: Attributes, calls: list[tuple[Webhook, str]]) -> None:
        errors = await asyncio.gather(*(self._call(webhook, version, attrs) for webhook, version in calls))
        for error in errors:
            if error is not None:
                raise error

    async def _call(self, webhook: Webhook, version: str, attrs: Attributes) -> StatusError | None:
        uid = str(uuid.uuid4())
        where = {
            "webhook": webhook.name,
            "configuration": webhook.configuration,
            "operation": attrs.operation,
            "resource": f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource,
            "object": f"{attrs.namespace}/{attrs.name}" if attrs.namespace else attrs.name,
        }
        try:
            body = await post(webhook, reviews.request(webhook, attrs, version, uid), self._lookup, self._sessions)
            verdict = reviews.verdict(body, webhook, uid)
        except reviews.CallFailed as e:
            if not webhook.fails_closed:
                log.warning("Failed calling webhook, failing open", extra={**where, "reason": str(e)})
                self._metrics.webhook_fail_open.labels(webhook.name, "validating").inc()
                return None
            log.warning("Failed calling webhook, failing closed", extra={**where, "reason": str(e)})
            failed = reviews.call_failed(webhook, str(e))
            self._metrics.webhook_rejections.labels(
                webhook.name, "validating", attrs.operation, "calling_webhook_error", str(failed.code)
            ).inc()
            return failed
        for warning in verdict.warnings:
            log.info("Webhook warning", extra={**where, "warning": warning})
        if verdict.allowed:
            return None
        error = reviews.denied(webhook, verdict.status)
        log.info("Rejected by webhook", extra={**where, "answer": error.message})
        self._metrics.webhook_rejections.labels(
            webhook.name, "validating", attrs.operation, "no_error", str(error.code)
        ).inc()
        return error
