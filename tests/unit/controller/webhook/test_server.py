"""The webhook server over real HTTPS on a loopback port: answers, 503 before sync, 400 for
nonsense, and a renewed certificate served without a restart."""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry

from apis.crds.elasticquota import ElasticQuota
from apis.errors import ConfigError
from controller.webhook import QUOTA_PATH, WebhookServer, WebhookSettings
from kube.pki import CA
from tests.support.quotas import elastic_quota


class Served:
    def __init__(self, tmp_path: Path) -> None:
        self.ca = CA.create("webhook-unit-ca")
        self.stem = tmp_path / "tls"
        self.ca.issue("webhook", server=True, ips=["127.0.0.1"]).write(self.stem)
        self.synced = True
        self.quotas: list[ElasticQuota] = []
        settings = WebhookSettings("127.0.0.1", 0, self.stem.with_suffix(".crt"), self.stem.with_suffix(".key"))
        self.server = WebhookServer(
            settings, quotas=lambda: self.quotas, synced=lambda: self.synced, registry=CollectorRegistry()
        )

    def post(self, body: bytes) -> tuple[int, bytes, x509.Certificate]:
        """(status, body, the certificate served) of one POST on a new connection."""
        context = ssl.create_default_context(cadata=self.ca.pem.decode())
        head = f"POST {QUOTA_PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        with (
            socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            peer = x509.load_der_x509_certificate(tls.getpeercert(binary_form=True) or b"")
            tls.sendall(head.encode() + body)
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
        status_line, _, rest = data.partition(b"\r\n")
        return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2], peer


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    s = Served(tmp_path)
    s.server.start()
    yield s
    s.server.stop()


def review(obj: dict[str, Any]) -> bytes:
    request = {"uid": "u-1", "operation": "CREATE", "name": obj["metadata"]["name"], "object": obj, "oldObject": None}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()


def test_a_review_is_answered_as_an_admission_review(served: Served) -> None:
    status, body, _ = served.post(review(elastic_quota("q", min_gpu="9")))
    answer = json.loads(body)
    assert status == 200 and answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == "u-1" and answer["response"]["allowed"] is False
    assert (
        answer["response"]["status"]["code"] == 403 and "min 9 exceeds max 8" in answer["response"]["status"]["message"]
    )
    assert json.loads(served.post(review(elastic_quota("q")))[1])["response"] == {"uid": "u-1", "allowed": True}


def test_before_the_informer_synced_it_answers_503_and_nonsense_is_400(served: Served) -> None:
    assert served.post(b"{}")[0] == 400
    served.synced = False
    assert served.post(review(elastic_quota("q")))[0] == 503


def test_a_renewed_certificate_is_served_to_new_connections(served: Served) -> None:
    first = served.post(review(elastic_quota("q")))[2]
    served.ca.issue("webhook", server=True, ips=["127.0.0.1"]).write(served.stem)
    second = served.post(review(elastic_quota("q")))[2]
    assert first.serial_number != second.serial_number
    served.stem.with_suffix(".crt").write_text("broken")  # half-written: the previous one is kept
    assert served.post(review(elastic_quota("q")))[2].serial_number == second.serial_number


def test_files_that_do_not_load_are_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("not a certificate")
    (tmp_path / "tls.key").write_text("not a key")
    settings = WebhookSettings("127.0.0.1", 0, tmp_path / "tls.crt", tmp_path / "tls.key")
    with pytest.raises(ConfigError, match="webhook certificate"):
        WebhookServer(settings, quotas=list, synced=lambda: True, registry=CollectorRegistry())
