"""The controller's ElasticQuota webhook in `tessera up`: its certificate, and its registration.

As in a cluster (deploy/controller-webhook.yaml, which this reads, so both register the same
webhook): a CA and a serving certificate for the webhook's Service (made once, kept in
DATA_DIR/controller/webhook/), the controller serving HTTPS on a loopback port chosen at start,
and — once it is ready — the Service, Endpoints pointing at 127.0.0.1:PORT (the embedded API
server resolves services through their Endpoints: docs/user/apiserver.md) and the
ValidatingWebhookConfiguration with the CA as caBundle. So `kubectl apply` of a bad quota is
refused here exactly as on a real cluster. The three objects carry tessera up's own names
(`tessera-up-tessera-controller-webhook`, `tessera-up-tessera-controller`: ownnames.py), so the
Helm chart's webhook installs beside them.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from cli.localcluster import ownnames
from kube.client import Client
from kube.errors import AlreadyExists
from kube.patch import create_or_replace
from kube.pki import CA, dns_names
from kube.process import free_loopback_port
from kube.resources import ENDPOINTS, NAMESPACES, SERVICES, VALIDATING_WEBHOOK_CONFIGURATIONS

__all__ = ["MANIFEST", "SERVICE", "WebhookSetup", "documents", "objects", "prepare", "register"]

MANIFEST: Final = Path(__file__).resolve().parents[2] / "deploy" / "controller-webhook.yaml"
NAMESPACE: Final = "tessera-system"
#: deploy's Service of the webhook, under tessera up's own name.
SERVICE: Final = ownnames.own_name("Service", "tessera-controller-webhook")
_VALIDITY: Final = datetime.timedelta(days=3650)


@dataclass(frozen=True, slots=True)
class WebhookSetup:
    ca_pem: bytes
    cert_file: Path
    key_file: Path
    port: int

    def controller_args(self) -> list[str]:
        """The flags that make `tessera controller` serve the webhook."""
        return [
            f"--webhook-bind-address=127.0.0.1:{self.port}",
            f"--webhook-cert-file={self.cert_file}",
            f"--webhook-key-file={self.key_file}",
        ]


def prepare(directory: Path) -> WebhookSetup:
    """The certificates in `directory` (made on first use, then kept) and a free loopback port."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_file, cert_file, key_file = directory / "ca.crt", directory / "tls.crt", directory / "tls.key"
    host = f"{SERVICE}.{NAMESPACE}.svc"
    kept = ca_file.is_file() and cert_file.is_file() and key_file.is_file()
    if not kept or host not in dns_names(cert_file.read_bytes()):  # an earlier run's, for another name
        ca = CA.create("tessera-webhook-ca", validity=_VALIDITY)
        issued = ca.issue(SERVICE, server=True, dns=[host, "localhost"], ips=["127.0.0.1"], validity=_VALIDITY)
        issued.write(directory / "tls")
        ca_file.write_bytes(ca.pem)
    return WebhookSetup(ca_file.read_bytes(), cert_file, key_file, free_loopback_port())


def documents() -> dict[str, dict[str, Any]]:
    """deploy/controller-webhook.yaml's objects, by kind, under deploy's names."""
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text()) if d}


def objects(setup: WebhookSetup) -> list[dict[str, Any]]:
    """The Service, its Endpoints and the configuration that register the webhook `setup` serves."""
    docs = documents()
    service = ownnames.own_object(docs["Service"])
    port = service["spec"]["ports"][0]
    service = {**service, "spec": {"ports": [{**port, "targetPort": setup.port}]}}  # no pods to select here
    endpoints = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": service["metadata"]["labels"]},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": port["name"], "port": setup.port}]}],
    }
    configuration = ownnames.own_object(docs["ValidatingWebhookConfiguration"])
    ca_bundle = base64.b64encode(setup.ca_pem).decode()
    configuration["webhooks"] = [
        {
            **hook,
            "clientConfig": {
                **hook["clientConfig"],
                "service": {**hook["clientConfig"]["service"], "name": SERVICE},
                "caBundle": ca_bundle,
            },
        }
        for hook in configuration["webhooks"]
    ]
    return [service, endpoints, configuration]


def register(client: Client, setup: WebhookSetup) -> None:
    """Register the webhook (create or replace each object): call once the controller serves it."""
    service, endpoints, configuration = objects(setup)
    with contextlib.suppress(AlreadyExists):
        client.resource(NAMESPACES).create({"metadata": {"name": NAMESPACE}})
    create_or_replace(client.resource(SERVICES), service, namespace=NAMESPACE)
    create_or_replace(client.resource(ENDPOINTS), endpoints, namespace=NAMESPACE)
    create_or_replace(client.resource(VALIDATING_WEBHOOK_CONFIGURATIONS), configuration)
