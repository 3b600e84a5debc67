"""Where a client's `RESTConfig` comes from: kubeconfig files or the in-cluster service account.

`Client.from_settings` calls `load(settings)`: with no `--kubeconfig` inside a pod (
`$KUBERNETES_SERVICE_HOST` set) the service account (`in_cluster`), else the kubeconfig named by
`--kubeconfig`, `$KUBECONFIG` (several files, `:`-separated) or `~/.kube/config`
(`from_kubeconfig`). The rules are kubectl's:

- files are merged in order: the first file to define a cluster, user or context name wins, and
  so does the first `current-context`; missing files in `$KUBECONFIG` are skipped;
- a relative path (`certificate-authority`, `client-certificate`, `client-key`, `tokenFile`) is
  relative to the file that defines the entry; `*-data` (base64) wins over the file;
- the user authenticates with `token` (or `tokenFile`, read again every minute), a client
  certificate, or `username`/`password`; `insecure-skip-tls-verify`, `tls-server-name` and
  `proxy-url` apply to the cluster.

A user with an `exec` credential plugin or an `auth-provider` (cloud logins) gets its credentials
from the `kubernetes` library (`kube.authplugins`), which runs and refreshes them; only such a
kubeconfig makes the process import it. Everything else here is plain YAML and files.
Every problem is a ConfigError naming the file, the entry and what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from apis.errors import ConfigError
from kube.restconfig import BasicAuth, BearerToken, Credentials, RESTConfig, TLSConfig, TokenFile

if TYPE_CHECKING:
    from kube.client import ClientSettings

__all__ = ["SERVICE_ACCOUNT_DIR", "from_kubeconfig", "in_cluster", "kubeconfig_paths", "load"]

#: Where kubelet mounts a pod's service account token and the cluster's CA.
SERVICE_ACCOUNT_DIR: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")

Entry = Mapping[str, Any]


def load(settings: ClientSettings, *, environ: Mapping[str, str] = os.environ) -> RESTConfig:
    """The configuration `settings` select: in-cluster inside a pod unless a kubeconfig is given."""
    if settings.kubeconfig is None and "KUBERNETES_SERVICE_HOST" in environ:
        return in_cluster(environ=environ)
    return from_kubeconfig(kubeconfig_paths(settings.kubeconfig, environ=environ), context=settings.context)


def kubeconfig_paths(explicit: Path | None, *, environ: Mapping[str, str] = os.environ) -> list[Path]:
    """The files to merge: the one given, else `$KUBECONFIG`'s, else `~/.kube/config`."""
    if explicit is not None:
        return [explicit]
    listed = [Path(p).expanduser() for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return listed or [Path("~/.kube/config").expanduser()]


def in_cluster(*, environ: Mapping[str, str] = os.environ, directory: Path = SERVICE_ACCOUNT_DIR) -> RESTConfig:
    """The pod's service account: the API server from `$KUBERNETES_SERVICE_HOST`/`_PORT`, the
    token (read again every minute, as kubelet rotates it) and the CA kubelet mounts."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST", ""), environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("not running in a pod: $KUBERNETES_SERVICE_HOST and $KUBERNETES_SERVICE_PORT must be set")
    token, ca = TokenFile(directory / "token"), directory / "ca.crt"
    try:
        token.read()
        if not ca.read_bytes().strip():
            raise ValueError(f"the CA file {ca} is empty")
    except (OSError, ValueError) as e:
        raise ConfigError(f"in-cluster configuration: {e}") from e
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return RESTConfig(server, tls=TLSConfig(ca_file=ca), credentials=token, source="in-cluster service account")


@dataclass(frozen=True, slots=True)
class _Named:
    """One cluster, user or context entry and the directory of the file that defined it."""

    value: Entry
    directory: Path


@dataclass(slots=True)
class _Merged:
    clusters: dict[str, _Named]
    users: dict[str, _Named]
    contexts: dict[str, _Named]
    current_context: str = ""


def from_kubeconfig(paths: Sequence[Path], *, context: str | None = None) -> RESTConfig:
    """The configuration of `context` (default: the current context) in the merged `paths`."""
    merged, read = _merge(paths)
    where = "kubeconfig " + ":".join(str(p) for p in read)
    name = context or merged.current_context
    if not name:
        raise ConfigError(f"{where}: no current-context, and no --context given")
    ctx = merged.contexts.get(name)
    if ctx is None:
        raise ConfigError(f"{where}: no context named {name!r}")
    cluster_name, user_name = _text(ctx.value, "cluster", where), _text(ctx.value, "user", where)
    cluster = merged.clusters.get(cluster_name)
    if cluster is None:
        raise ConfigError(f"{where}: context {name!r} names cluster {cluster_name!r}, which is not defined")
    user = merged.users.get(user_name) if user_name else None
    if user_name and user is None:
        raise ConfigError(f"{where}: context {name!r} names user {user_name!r}, which is not defined")
    source = f"{where}, context {name}"
    server = _text(cluster.value, "server", source).rstrip("/")
    if not server.startswith(("https://", "http://")):
        raise ConfigError(f"{source}: cluster {cluster_name!r}: server {server!r} must start with https:// or http://")
    credentials, tls = _user(user, source, paths=read, context=name) if user is not None else (None, TLSConfig())
    tls = TLSConfig(
        insecure=bool(cluster.value.get("insecure-skip-tls-verify", False)),
        ca_file=_path(cluster, "certificate-authority", source),
        ca_data=_data(cluster.value, "certificate-authority-data", source),
        cert_file=tls.cert_file,
        cert_data=tls.cert_data,
        key_file=tls.key_file,
        key_data=tls.key_data,
        server_name=_text(cluster.value, "tls-server-name", source),
    )
    return RESTConfig(
        server, tls=tls, credentials=credentials, proxy_url=_text(cluster.value, "proxy-url", source), source=source
    )


def _merge(paths: Sequence[Path]) -> tuple[_Merged, list[Path]]:
    """kubectl's merge: first definition of a name wins, first current-context wins. A single
    file must exist; of several (`$KUBECONFIG`), the missing ones are skipped."""
    merged = _Merged({}, {}, {})
    read: list[Path] = []
    for path in paths:
        try:
            doc = yaml.safe_load(path.read_text())
        except FileNotFoundError as e:
            if len(paths) == 1:
                raise ConfigError(f"kubeconfig {path}: no such file") from e
            continue
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"kubeconfig {path}: cannot read it: {e}") from e
        if doc is None:
            continue  # an empty file adds nothing
        if not isinstance(doc, dict):
            raise ConfigError(f"kubeconfig {path}: expected a mapping at the top")
        read.append(path)
        directory = path.resolve().parent
        for key, into in (("clusters", merged.clusters), ("users", merged.users), ("contexts", merged.contexts)):
            for name, value in _named_list(doc, key, path):
                into.setdefault(name, _Named(value, directory))
        if not merged.current_context and isinstance(doc.get("current-context"), str):
            merged.current_context = doc["current-context"]
    if not read:
        raise ConfigError("no kubeconfig: none of " + ", ".join(str(p) for p in paths) + " exists")
    return merged, read


def _named_list(doc: Entry, key: str, path: Path) -> list[tuple[str, Entry]]:
    """`clusters: [{name: n, cluster: {...}}]` → [(n, {...})]; the inner key is the list's singular."""
    items = doc.get(key) or []
    inner = key[:-1]
    if not isinstance(items, list):
        raise ConfigError(f"kubeconfig {path}: {key} must be a list")
    named: list[tuple[str, Entry]] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ConfigError(f"kubeconfig {path}: every entry of {key} needs a name")
        value = item.get(inner) or {}
        if not isinstance(value, dict):
            raise ConfigError(f"kubeconfig {path}: {key} {item['name']!r}: {inner} must be a mapping")
        named.append((item["name"], value))
    return named


def _user(user: _Named, source: str, *, paths: Sequence[Path], context: str) -> tuple[Credentials | None, TLSConfig]:
    """The user's credentials and client certificate. In client-go's order: a credential plugin,
    then a token, then username and password; a client certificate goes with any of them."""
    value = user.value
    cert = TLSConfig(
        cert_file=_path(user, "client-certificate", source),
        cert_data=_data(value, "client-certificate-data", source),
        key_file=_path(user, "client-key", source),
        key_data=_data(value, "client-key-data", source),
    )
    if (cert.cert_file or cert.cert_data) is not None and (cert.key_file or cert.key_data) is None:
        raise ConfigError(f"{source}: a client certificate needs its client-key (or client-key-data)")
    if "exec" in value or "auth-provider" in value:
        from kube import authplugins  # imports the kubernetes library: only for these users

        return authplugins.credentials(paths, context=context, source=source, tls=cert)
    token = _text(value, "token", source)
    if token:
        return BearerToken(token), cert
    token_file = _path(user, "tokenFile", source)
    if token_file is not None:
        credentials = TokenFile(token_file)
        try:
            credentials.read()
        except (OSError, ValueError) as e:
            raise ConfigError(f"{source}: tokenFile: {e}") from e
        return credentials, cert
    username, password = _text(value, "username", source), _text(value, "password", source)
    if username and password:
        return BasicAuth(username, password), cert
    return None, cert


def _text(entry: Entry, key: str, source: str) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str):
        raise ConfigError(f"{source}: {key} must be a string, not {type(value).__name__}")
    return value


def _path(named: _Named, key: str, source: str) -> Path | None:
    """A file the entry names, relative to the kubeconfig that defined it."""
    value = _text(named.value, key, source)
    return named.directory / Path(value).expanduser() if value else None


def _data(entry: Entry, key: str, source: str) -> bytes | None:
    value = _text(entry, key, source)
    if not value:
        return None
    try:
        return base64.b64decode("".join(value.split()), validate=True)  # line breaks are allowed
    except binascii.Error as e:
        raise ConfigError(f"{source}: {key} is not base64: {e}") from e
