"""The embedded API server's `/metrics`: what an operator alerts on, under kube-apiserver's names.

Why: a cluster's Prometheus scrapes kube-apiserver, and alerts such as "the quota webhook fails
closed" are written against kube-apiserver's admission metrics; `tessera up` serves the same names
so the rules in deploy/monitoring work against it unchanged. Only what the rules and dashboards read
is kept (kube's metrics carry more labels): requests by verb and code, and a webhook call's outcome.
One instance per server (no module-level registry), passed to the handlers and to admission.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

__all__ = ["CONTENT_TYPE", "APIServerMetrics"]

#: Prometheus' text exposition format.
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"


class APIServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "apiserver_request",
            "Requests answered, by verb (HTTP method) and HTTP code.",
            ["verb", "code"],
            registry=self.registry,
        )
        # kube-apiserver: error_type calling_webhook_error when the webhook could not be called and
        # its failurePolicy is Fail (the request is refused: "failing closed"), no_error when it
        # answered and refused. kube's counters are named without `_total`, which prometheus_client
        # adds to every Counter: so these two only ever go up, but are typed gauges to keep the name.
        self.webhook_rejections = Gauge(
            "apiserver_admission_webhook_rejection_count",
            "Admission webhook rejections, by webhook, type, operation, error type and HTTP code.",
            ["name", "type", "operation", "error_type", "rejection_code"],
            registry=self.registry,
        )
        self.webhook_fail_open = Gauge(
            "apiserver_admission_webhook_fail_open_count",
            "Admission webhook calls that failed and were let through (failurePolicy Ignore).",
            ["name", "type"],
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
