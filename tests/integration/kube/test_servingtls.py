"""A component's operational port over HTTPS (kube.servingtls): a self-signed certificate for the
node's name, or the cluster's own; real sockets, real TLS handshakes."""

from __future__ import annotations

import ssl
import urllib.request
from pathlib import Path

import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry

from apis.errors import ConfigError
from kube import serving
from kube.pki import CA
from kube.servingtls import TLSServing

pytestmark = pytest.mark.integration


def get(port: int, context: ssl.SSLContext, host: str = "127.0.0.1") -> tuple[int, str]:
    with urllib.request.urlopen(f"https://{host}:{port}/healthz", context=context, timeout=10) as answer:
        return answer.status, answer.read().decode()


def served(tls: ssl.SSLContext | None) -> serving.Server:
    server = serving.Server("tls HTTP", host="127.0.0.1", port=0, registry=CollectorRegistry(), tls=tls)
    server.start()
    return server


def test_a_self_signed_certificate_names_the_node_and_keeps_tokens_off_the_wire() -> None:
    server = served(TLSServing(self_signed=True).context(["gpu-node-7"]))
    try:
        unverified = ssl.create_default_context()
        unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE  # curl -k, insecure_skip_verify
        assert get(server.port, unverified) == (200, "ok\n")
        pem = ssl.get_server_certificate(("127.0.0.1", server.port))
        names = x509.load_pem_x509_certificate(pem.encode()).extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        )
        assert "gpu-node-7" in names.value.get_values_for_type(x509.DNSName)
        with pytest.raises(OSError):  # a client that verifies does not trust it
            get(server.port, ssl.create_default_context())
        with pytest.raises(OSError):  # and plain HTTP gets no answer
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5)
    finally:
        server.stop()


def test_the_clusters_certificate_is_served_and_verified(tmp_path: Path) -> None:
    ca = CA.create("cluster-ca")
    cert, key = ca.issue("agent", server=True, dns=["localhost"], ips=["127.0.0.1"]).write(tmp_path / "serving")
    server = served(TLSServing(cert, key).context())
    try:
        trusting = ssl.create_default_context(cadata=ca.pem.decode())
        assert get(server.port, trusting) == (200, "ok\n")
    finally:
        server.stop()
    with pytest.raises(ConfigError, match="cannot load it"):
        TLSServing(cert, tmp_path / "missing.key").context()
