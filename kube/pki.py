"""Certificates, made in one place: a CA that issues serving and client certificates (PEM bytes).

The embedded API server's own TLS (apiserver/pki.py), the controller's admission-webhook serving
certificate that `tessera up` makes, and the tests' TLS all come from here. A real cluster gets
its webhook certificate from cert-manager or a Secret instead (docs/user/deploy.md).

    ca = CA.create("tessera-webhook-ca")
    serving = ca.issue("tessera-controller", server=True, dns=["svc.ns.svc"], ips=["127.0.0.1"])
    serving.write(directory / "tls")      # tls.crt, tls.key
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CA", "Issued", "dns_names"]

_DAY = datetime.timedelta(days=1)
#: Clocks of the machines involved may disagree a little; certificates start this much earlier.
_SKEW = datetime.timedelta(minutes=5)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def dns_names(cert_pem: bytes) -> frozenset[str]:
    """The DNS names a PEM certificate is for (its subjectAltName); empty when it names none."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return frozenset()
    return frozenset(sans.get_values_for_type(x509.DNSName))


@dataclass(frozen=True, slots=True)
class Issued:
    cert_pem: bytes
    key_pem: bytes

    def write(self, stem: Path) -> tuple[Path, Path]:
        """Write `STEM.crt` and `STEM.key` (mode 600); returns their paths."""
        cert, key = stem.with_suffix(".crt"), stem.with_suffix(".key")
        cert.write_bytes(self.cert_pem)
        key.touch(0o600)
        key.chmod(0o600)
        key.write_bytes(self.key_pem)
        return cert, key

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)


@dataclass(frozen=True, slots=True)
class CA:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(cls, name: str = "tessera-test-ca", *, validity: datetime.timedelta = _DAY) -> CA:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _SKEW)
            .not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @classmethod
    def load(cls, cert_pem: bytes, key_pem: bytes) -> CA | None:
        """The CA stored as PEM, or None when the key is not one this module makes."""
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            return None
        return cls(x509.load_pem_x509_certificate(cert_pem), key)

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return key_pem(self.key)

    def issue(
        self,
        name: str,
        *,
        server: bool = False,
        client: bool = False,
        dns: Sequence[str] = (),
        ips: Sequence[str] = (),
        validity: datetime.timedelta = _DAY,
    ) -> Issued:
        """A certificate for `name` (its common name), for serving (with SANs `dns` and `ips`) or for clients."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] * server + [ExtendedKeyUsageOID.CLIENT_AUTH] * client
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _SKEW)
            .not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return Issued(cert.public_bytes(serialization.Encoding.PEM), key_pem(key))
