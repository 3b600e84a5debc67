"""TLS for the embedded server: a self-signed CA and a serving certificate, made on first start.

client-go (kubectl) sends a bearer token only over TLS, so a server that requires a token must
speak HTTPS. The CA and serving key are kept in the data directory and reused across restarts, so
a kubeconfig written once (it embeds the CA) stays valid. The certificates themselves are made by
`kube.pki`, shared with `tessera up`'s webhook certificate and the tests.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from kube.pki import CA

__all__ = ["ServingCert", "ensure_serving_cert"]

_VALIDITY = datetime.timedelta(days=3650)


@dataclass(frozen=True, slots=True)
class ServingCert:
    ca_pem: bytes
    cert_path: Path
    key_path: Path

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.cert_path, self.key_path)
        return ctx


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _sans(host: str) -> tuple[list[str], list[str]]:
    """The DNS names and IP addresses the serving certificate covers."""
    dns, ips = ["localhost"], ["127.0.0.1", "::1"]
    try:
        ip = ipaddress.ip_address(host)
        if str(ip) not in ips:
            ips.append(str(ip))
    except ValueError:
        if host and host != "localhost":
            dns.append(host)
    return dns, ips


def _load_or_create_ca(directory: Path) -> CA:
    ca_path, ca_key_path = directory / "ca.crt", directory / "ca.key"
    if ca_path.exists() and ca_key_path.exists():
        ca = CA.load(ca_path.read_bytes(), ca_key_path.read_bytes())
        if ca is not None:
            return ca
    ca = CA.create("tessera-apiserver-ca", validity=_VALIDITY)
    _write(ca_key_path, ca.key_pem, 0o600)
    _write(ca_path, ca.pem, 0o644)
    return ca


def ensure_serving_cert(directory: Path, host: str) -> ServingCert:
    """Load the CA and serving certificate from `directory`, creating what is missing.

    A serving certificate that does not cover `host` is re-issued from the same CA.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca_path, cert_path, key_path = directory / "ca.crt", directory / "serving.crt", directory / "serving.key"
    dns, ips = _sans(host)
    if ca_path.exists() and cert_path.exists() and key_path.exists():
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        have = {str(n.value) for n in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value}
        if {*dns, *ips} <= have:
            return ServingCert(ca_path.read_bytes(), cert_path, key_path)
    ca = _load_or_create_ca(directory)
    issued = ca.issue("tessera-apiserver", server=True, dns=dns, ips=ips, validity=_VALIDITY)
    _write(key_path, issued.key_pem, 0o600)
    _write(cert_path, issued.cert_pem, 0o644)
    return ServingCert(ca.pem, cert_path, key_path)
