"""How to reach one API server, whatever it was loaded from: `RESTConfig` (as client-go's
`rest.Config`), its TLS settings and where the Authorization header comes from.

`kube.clientconfig` fills one in from a kubeconfig or the in-cluster service account,
`kube.connection` turns it into a connection pool, and `kube.client.Client` sends requests with
it. It holds no library types, so a client is built without importing the `kubernetes` library
(and its model classes, pydantic and requests: about 20 MiB per process); only a kubeconfig whose
user runs a credential plugin loads it (`kube.authplugins`).
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from kube import errors

__all__ = ["BasicAuth", "BearerToken", "Credentials", "RESTConfig", "TLSConfig", "TokenFile"]

#: How long a token read from a file is used before the file is read again: projected service
#: account tokens rotate (kubelet rewrites the file), and client-go re-reads after a minute too.
TOKEN_FILE_PERIOD_S: Final = 60.0


class Credentials(Protocol):
    """Where a request's Authorization header comes from."""

    def authorization(self) -> str | None:
        """The header's value for the next request (None: send none). May read a file or run a
        credential plugin; raises kube.errors.Unauthorized when the credentials cannot be had."""
        ...


@dataclass(frozen=True, slots=True)
class BearerToken:
    token: str

    def authorization(self) -> str | None:
        return f"Bearer {self.token}"

    def __repr__(self) -> str:  # never the token itself in a log or a traceback
        return "BearerToken(...)"


@dataclass(frozen=True, slots=True)
class BasicAuth:
    username: str
    password: str = field(repr=False)

    def authorization(self) -> str | None:
        return "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()


class TokenFile:
    """A bearer token read from a file, read again once `period_s` has passed since the last read
    (a rotated token is picked up). Thread-safe."""

    def __init__(
        self, path: Path, *, period_s: float = TOKEN_FILE_PERIOD_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path = path
        self._period_s = period_s
        self._clock = clock
        self._lock = threading.Lock()
        self._token = ""
        self._read_at = 0.0

    def read(self) -> str:
        """The token in the file now. Raises OSError, or ValueError for an empty file."""
        token = self.path.read_text().strip()
        if not token:
            raise ValueError(f"the token file {self.path} is empty")
        return token

    def authorization(self) -> str | None:
        with self._lock:
            now = self._clock()
            if not self._token or now - self._read_at >= self._period_s:
                try:
                    self._token = self.read()
                except (OSError, ValueError) as e:
                    if not self._token:
                        raise errors.Unauthorized(f"cannot read the bearer token: {e}") from e
                    # A file being rewritten: keep the last good token, try again next time.
                else:
                    self._read_at = now
            return f"Bearer {self._token}"

    def __repr__(self) -> str:
        return f"TokenFile({str(self.path)!r})"


@dataclass(frozen=True, slots=True)
class TLSConfig:
    """TLS towards the server. A PEM given as data wins over a file (as in kubectl)."""

    #: Do not verify the server's certificate (`insecure-skip-tls-verify`).
    insecure: bool = False
    ca_file: Path | None = None
    ca_data: bytes | None = None
    #: A client certificate and its key, both as files or both as data.
    cert_file: Path | None = None
    cert_data: bytes | None = None
    key_file: Path | None = None
    key_data: bytes | None = field(default=None, repr=False)
    #: The name to ask for (SNI) and verify the certificate against, when not the server's host.
    server_name: str = ""

    @property
    def has_client_cert(self) -> bool:
        return (self.cert_file or self.cert_data) is not None and (self.key_file or self.key_data) is not None


@dataclass(frozen=True, slots=True)
class RESTConfig:
    """One API server and how to talk to it."""

    #: `https://host:port` (or http), without a trailing slash.
    server: str
    tls: TLSConfig = TLSConfig()
    credentials: Credentials | None = None
    #: A proxy from the kubeconfig (`proxy-url`); "" to use $HTTPS_PROXY/$HTTP_PROXY unless
    #: $NO_PROXY exempts the server, as client-go does.
    proxy_url: str = ""
    #: Where it came from, for messages ("kubeconfig /root/.kube/config, context kind").
    source: str = ""
