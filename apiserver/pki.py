"""TLS for the embedded server: a self-signed CA and a serving certificate, made on first start.

client-go (kubectl) sends a bearer token only over TLS, so a server that requires a token must
speak HTTPS. The CA and serving key are kept in the data directory and reused across restarts, so
a kubeconfig written once (it embeds the CA) stays valid.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

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


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _sans(host: str) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    try:
        ip = ipaddress.ip_address(host)
        if ip not in (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")):
            names.append(x509.IPAddress(ip))
    except ValueError:
        if host and host != "localhost":
            names.append(x509.DNSName(host))
    return names


def _load_or_create_ca(directory: Path, now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_path, ca_key_path = directory / "ca.crt", directory / "ca.key"
    if ca_path.exists() and ca_key_path.exists():
        key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
        if isinstance(key, ec.EllipticCurvePrivateKey):
            return x509.load_pem_x509_certificate(ca_path.read_bytes()), key
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tessera-apiserver-ca")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    _write(ca_key_path, _key_pem(key), 0o600)
    _write(ca_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return cert, key


def ensure_serving_cert(directory: Path, host: str) -> ServingCert:
    """Load the CA and serving certificate from `directory`, creating what is missing.

    A serving certificate that does not cover `host` is re-issued from the same CA.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca_path, cert_path, key_path = directory / "ca.crt", directory / "serving.crt", directory / "serving.key"
    if ca_path.exists() and cert_path.exists() and key_path.exists():
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        wanted = {str(n.value) for n in _sans(host)}
        have = {str(n.value) for n in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value}
        if wanted <= have:
            return ServingCert(ca_path.read_bytes(), cert_path, key_path)
    now = datetime.datetime.now(datetime.UTC)
    ca_cert, ca_key = _load_or_create_ca(directory, now)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tessera-apiserver")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.SubjectAlternativeName(_sans(host)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    _write(key_path, _key_pem(key), 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return ServingCert(ca_cert.public_bytes(serialization.Encoding.PEM), cert_path, key_path)
