"""Refusing requests a web page made a browser send: DNS rebinding and cross-site forgery.

A page on `evil.example` can point its own name at 127.0.0.1 (DNS rebinding) and then read and
drive a server on this machine as if it were its own origin; or it can submit a form (a
`text/plain` POST needs no preflight) to any address. Neither can choose the `Host` header the
browser sends (the page's name) nor hide where it comes from (`Origin`, `Sec-Fetch-Site`). So a
server that answers browsers' questions checks, before anything else:

- `Host` is an IP address, `localhost` (or a name under `.localhost`), a Service name in the
  cluster (`*.svc`, `*.svc.cluster.local`), or a name the server was given (the machine's host
  name, the node's name, a dashboard's `--allowed-host`). A name a page can control is none of these;
- `Origin`, when sent, names this same host and port (a page's own requests carry none or this one);
- a request that changes something (not GET/HEAD/OPTIONS) does not say `Sec-Fetch-Site: cross-site`.

The components' operational servers (`kube.serving`) and the dashboard both use `HostPolicy`.
HTTPS servers (admission webhooks) skip it: a rebound name fails the certificate check.
Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

__all__ = ["CLUSTER_SUFFIXES", "HostPolicy", "default_names"]

#: Names that resolve inside a cluster only (a Service's DNS names).
CLUSTER_SUFFIXES: Final = (".svc", ".svc.cluster.local")
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})


def default_names() -> frozenset[str]:
    """This machine's host name (short and as configured), which people and probes may use."""
    name = socket.gethostname().lower().rstrip(".")
    return frozenset({name, name.split(".", 1)[0]} - {""})


def _hostname(host_header: str) -> str:
    """`Host` without its port, brackets and trailing dot, lower-cased."""
    host = host_header.strip().lower()
    if host.startswith("["):  # [::1]:8080
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """Which `Host` names a server answers to, beyond IP addresses, localhost and Service names."""

    names: frozenset[str] = field(default_factory=default_names)

    @classmethod
    def with_names(cls, names: Iterable[str]) -> HostPolicy:
        """The default names and these (a node's name, `--allowed-host` values)."""
        return cls(default_names() | {n.lower().rstrip(".") for n in names if n})

    def host_allowed(self, host_header: str) -> bool:
        """Whether a request with this `Host` may be answered. No `Host` at all (HTTP/1.0, a
        raw client): allowed, since every browser sends one."""
        host = _hostname(host_header)
        if not host_header.strip():
            return True
        if _is_ip(host) or host == "localhost" or host.endswith(".localhost"):
            return True
        return host in self.names or host.endswith(CLUSTER_SUFFIXES)

    def refusal(self, method: str, headers: Mapping[str, str]) -> str | None:
        """Why this request looks like a web page's doing, or None. `headers` in lower case."""
        host = headers.get("host", "")
        if not self.host_allowed(host):
            return f'the Host "{host}" is not a name this server answers to (DNS rebinding?)'
        origin = headers.get("origin", "")
        if origin and origin != "null":
            parts = urlsplit(origin)
            if parts.netloc.lower() != host.strip().lower():
                return f'a request from the web page of "{origin}" to "{host}" (cross-site)'
        elif origin == "null" and method not in _SAFE_METHODS:
            return "a request from an opaque origin (a sandboxed page or a file)"
        if method not in _SAFE_METHODS and headers.get("sec-fetch-site", "") == "cross-site":
            return f"a cross-site {method} from a web page"
        return None
