"""The connection pools behind a `Client`, with the TLS and proxy a `RESTConfig` asks for: the lean
one (`kube.http1`) for request/response calls, urllib3 for streams and proxies.

TLS is one `ssl.SSLContext`, made once: the CA (or the system's when none is given), the client
certificate and key, or no verification (`insecure-skip-tls-verify`); `tls-server-name` is the
name sent and verified. A client certificate given as data is written to a private temporary
file only while OpenSSL loads it, so no key stays on disk. The proxy is the kubeconfig's
`proxy-url`, else `$HTTPS_PROXY` / `$HTTP_PROXY` (by the server's scheme, or `$ALL_PROXY`) unless
`$NO_PROXY` exempts the server (names, `.suffix`es, `host:port`, IPs and CIDRs, `*`), as
client-go does.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import tempfile
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import urllib3
from urllib3.util.ssl_ import create_urllib3_context

from apis.errors import ConfigError
from kube import http1
from kube.restconfig import RESTConfig, TLSConfig

__all__ = ["bypasses_proxy", "direct_pool", "pool_manager", "proxy_for", "ssl_context"]


def pool_manager(config: RESTConfig, *, maxsize: int, retries: int | None = None) -> urllib3.PoolManager:
    """A pool for `config.server`; raises ConfigError for TLS files that do not load.
    `retries` None keeps urllib3's default (3 tries on connection errors)."""
    options: dict[str, Any] = {"maxsize": maxsize}
    if retries is not None:
        options["retries"] = retries
    if urlsplit(config.server).scheme == "https":
        options["ssl_context"] = ssl_context(config.tls, source=config.source)
        options["cert_reqs"] = ssl.CERT_NONE if config.tls.insecure else ssl.CERT_REQUIRED
        if config.tls.server_name:
            options["server_hostname"] = config.tls.server_name
    proxy = proxy_for(config)
    if not proxy:
        return urllib3.PoolManager(**options)
    if urlsplit(proxy).scheme.startswith("socks"):
        try:
            from urllib3.contrib.socks import SOCKSProxyManager
        except ImportError as e:  # urllib3 needs PySocks for it
            raise ConfigError(f"{config.source}: SOCKS proxy {proxy}: {e}") from e
        return SOCKSProxyManager(proxy, **options)
    return urllib3.ProxyManager(proxy, **options)


def direct_pool(config: RESTConfig, *, maxsize: int, retries: int | None = None) -> http1.ConnectionPool | None:
    """The lean pool (`kube.http1`) for `config.server`, or None when a proxy stands between (urllib3
    speaks to proxies). The same TLS as `pool_manager`'s, with the name checked by `ssl` itself."""
    if proxy_for(config):
        return None
    split = urlsplit(config.server)
    context = None
    if split.scheme == "https":
        context = ssl_context(config.tls, source=config.source)
        context.check_hostname = not config.tls.insecure
    return http1.ConnectionPool(
        split.scheme,
        split.hostname or "",
        split.port,
        context=context,
        server_hostname=config.tls.server_name or None,
        maxsize=maxsize,
        retries=3 if retries is None else retries,
    )


def ssl_context(tls: TLSConfig, *, source: str = "") -> ssl.SSLContext:
    """The context for every connection of one client; raises ConfigError naming what failed."""
    context = create_urllib3_context(cert_reqs=ssl.CERT_NONE if tls.insecure else ssl.CERT_REQUIRED)
    where = f"{source}: " if source else ""
    try:
        if not tls.insecure:
            if tls.ca_data is not None:
                context.load_verify_locations(cadata=tls.ca_data.decode())
            elif tls.ca_file is not None:
                context.load_verify_locations(cafile=str(tls.ca_file))
            else:
                context.load_default_certs()
    except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
        raise ConfigError(f"{where}cannot load the certificate authority: {e}") from e
    if tls.has_client_cert:
        try:
            _load_client_cert(context, tls)
        except (OSError, ValueError) as e:
            raise ConfigError(f"{where}cannot load the client certificate and key: {e}") from e
    return context


def _load_client_cert(context: ssl.SSLContext, tls: TLSConfig) -> None:
    """`load_cert_chain` reads only files: data goes through a 0600 file in a 0700 directory,
    removed as soon as it is loaded."""
    with tempfile.TemporaryDirectory(prefix="tessera-tls-") as scratch:
        cert = _file(tls.cert_file, tls.cert_data, Path(scratch) / "client.crt")
        key = _file(tls.key_file, tls.key_data, Path(scratch) / "client.key")
        context.load_cert_chain(str(cert), str(key))


def _file(path: Path | None, data: bytes | None, scratch: Path) -> Path:
    if data is None:
        assert path is not None  # has_client_cert: a file or data for each
        return path
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return scratch


def proxy_for(config: RESTConfig, *, environ: Mapping[str, str] | None = None) -> str:
    """The proxy URL to reach `config.server` through, "" for none."""
    if config.proxy_url:
        return config.proxy_url
    proxies = urllib.request.getproxies_environment() if environ is None else _proxies(environ)
    split = urlsplit(config.server)
    proxy = proxies.get(split.scheme) or proxies.get("all") or ""
    if proxy and bypasses_proxy(split.hostname or "", split.port, proxies.get("no", "")):
        return ""
    return proxy


def _proxies(environ: Mapping[str, str]) -> dict[str, str]:
    """What `urllib.request.getproxies_environment` reads, from a given environment (lower case wins)."""
    found: dict[str, str] = {}
    for key, value in environ.items():
        if key.upper().endswith("_PROXY") and value:
            scheme = key[: -len("_proxy")].lower()
            if key.islower() or scheme not in found:
                found[scheme] = value
    return found


def bypasses_proxy(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether `$NO_PROXY` exempts `host` (and `port`): `*`, a name or `.suffix` (matching
    subdomains), `name:port`, an IP address or a CIDR."""
    host = host.lower().strip("[]")
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
        name, _, entry_port = entry.rpartition(":") if _has_port(entry) else (entry, "", "")
        if entry_port and str(port) != entry_port:
            continue
        name = name.lstrip(".").strip("[]")
        if host == name or host.endswith("." + name):
            return True
    return False


def _has_port(entry: str) -> bool:
    """`name:443` or `[::1]:443`, not a bare IPv6 address or CIDR."""
    head, sep, tail = entry.rpartition(":")
    return bool(sep) and tail.isdigit() and (head.endswith("]") or ":" not in head)
