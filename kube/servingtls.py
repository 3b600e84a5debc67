"""HTTPS for a component's operational port, as kube-scheduler's and kubelet's secure ports serve.

Callers of a component's endpoints send bearer tokens (`kube.delegation`): an operator's, a
Prometheus's. On loopback (`tessera up`) plain HTTP keeps them on the machine; on a node's or a
pod's network they must not travel in clear. `TLSServing` is the choice, from the flags every
serving component takes (`kube.servingflags.add_tls_arguments`):

- `--tls-cert-file` and `--tls-private-key-file`: a certificate of the cluster's (cert-manager, a
  Secret), read at start;
- `--tls-self-signed`: a certificate made in memory at start (as kube-scheduler does without
  `--tls-cert-file`), for the machine's and the node's names, valid a year; clients skip
  verification (Prometheus' `insecure_skip_verify`, `curl -k`) and still keep the token off the
  wire, as they do for kube-scheduler;
- neither: plain HTTP.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from apis.errors import ConfigError

__all__ = ["SELF_SIGNED_VALIDITY", "TLSServing"]

SELF_SIGNED_VALIDITY: Final = datetime.timedelta(days=365)


@dataclass(frozen=True, slots=True)
class TLSServing:
    cert_file: Path | None = None
    key_file: Path | None = None
    self_signed: bool = False

    @property
    def enabled(self) -> bool:
        return self.self_signed or self.cert_file is not None

    def validate(self) -> None:
        """Raises ConfigError for a half-given pair or both ways at once."""
        if (self.cert_file is None) != (self.key_file is None):
            raise ConfigError("--tls-cert-file and --tls-private-key-file go together")
        if self.self_signed and self.cert_file is not None:
            raise ConfigError("--tls-self-signed and --tls-cert-file: give one, not both")

    def context(self, names: Sequence[str] = ()) -> ssl.SSLContext | None:
        """The server's TLS context (None: plain HTTP). `names`: what a self-signed certificate
        is for, besides this machine's host name, `localhost` and the loopback addresses.
        Raises ConfigError when the files cannot be loaded."""
        if not self.enabled:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.cert_file is not None and self.key_file is not None:
            try:
                context.load_cert_chain(self.cert_file, self.key_file)
            except (OSError, ssl.SSLError) as e:
                raise ConfigError(f"--tls-cert-file {self.cert_file}: cannot load it with its key: {e}") from e
            return context
        from kube.pki import CA  # cryptography loads only for a self-signed certificate

        dns = sorted({socket.gethostname(), "localhost", *(n for n in names if n)})
        ca = CA.create("tessera-self-signed-ca", validity=SELF_SIGNED_VALIDITY)
        issued = ca.issue(dns[0], server=True, dns=dns, ips=["127.0.0.1", "::1"], validity=SELF_SIGNED_VALIDITY)
        with tempfile.TemporaryDirectory(prefix="tessera-tls-") as directory:  # 0700; gone once loaded
            cert, key = issued.write(Path(directory) / "serving")
            cert.write_bytes(issued.cert_pem + ca.pem)
            context.load_cert_chain(cert, key)
        return context
