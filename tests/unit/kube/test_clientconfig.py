"""kube.clientconfig: kubeconfig files and the in-cluster service account, read as kubectl reads them."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.errors import ConfigError
from kube import clientconfig
from kube.client import ClientSettings
from kube.restconfig import BasicAuth, BearerToken, TokenFile


def write(path: Path, *, clusters: Any = (), users: Any = (), contexts: Any = (), current: str | None = None) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters],
        "users": [{"name": n, "user": u} for n, u in users],
        "contexts": [{"name": n, "context": c} for n, c in contexts],
    }
    if current is not None:
        doc["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def one(path: Path, cluster: dict[str, Any], user: dict[str, Any] | None = None) -> Path:
    """A kubeconfig with one cluster `c`, one user `u` and the context `ctx` joining them."""
    return write(
        path,
        clusters=[("c", cluster)],
        users=[("u", user or {})],
        contexts=[("ctx", {"cluster": "c", "user": "u"})],
        current="ctx",
    )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_token_ca_data_and_cluster_options(tmp_path: Path) -> None:
    path = one(
        tmp_path / "config",
        {
            "server": "https://10.0.0.1:6443/",
            "certificate-authority-data": b64(b"CA PEM"),
            "certificate-authority": "ignored-because-data-wins.crt",
            "tls-server-name": "kubernetes.internal",
            "proxy-url": "http://proxy:3128",
        },
        {"token": "s3cret"},
    )
    config = clientconfig.from_kubeconfig([path])
    assert config.server == "https://10.0.0.1:6443"
    assert config.tls.ca_data == b"CA PEM" and config.tls.server_name == "kubernetes.internal"
    assert not config.tls.insecure and config.proxy_url == "http://proxy:3128"
    assert config.credentials == BearerToken("s3cret")
    assert config.credentials.authorization() == "Bearer s3cret"
    assert "s3cret" not in repr(config)
    assert config.source == f"kubeconfig {path}, context ctx"


def test_relative_files_are_relative_to_the_kubeconfig_that_names_them(tmp_path: Path) -> None:
    (tmp_path / "conf" / "pki").mkdir(parents=True)
    (tmp_path / "conf" / "pki" / "token").write_text("from-a-file\n")
    path = one(
        tmp_path / "conf" / "config",
        {"server": "https://k:6443", "certificate-authority": "pki/ca.crt"},
        {"client-certificate": "pki/me.crt", "client-key": "/abs/me.key", "tokenFile": "pki/token"},
    )
    config = clientconfig.from_kubeconfig([path])
    assert config.tls.ca_file == tmp_path / "conf" / "pki" / "ca.crt"
    assert (config.tls.cert_file, config.tls.key_file) == (tmp_path / "conf" / "pki" / "me.crt", Path("/abs/me.key"))
    assert config.tls.has_client_cert
    assert isinstance(config.credentials, TokenFile)
    assert config.credentials.authorization() == "Bearer from-a-file"


def test_client_certificate_data_basic_auth_and_insecure(tmp_path: Path) -> None:
    user = {"client-certificate-data": b64(b"CERT"), "client-key-data": b64(b"KEY"), "username": "a", "password": "b"}
    config = clientconfig.from_kubeconfig(
        [one(tmp_path / "config", {"server": "https://k", "insecure-skip-tls-verify": True}, user)]
    )
    assert (config.tls.cert_data, config.tls.key_data, config.tls.insecure) == (b"CERT", b"KEY", True)
    assert config.credentials == BasicAuth("a", "b")
    assert config.credentials.authorization() == "Basic " + b64(b"a:b")
    assert "'b'" not in repr(config.credentials)


def test_merging_follows_kubectl_first_definition_and_first_current_context_win(tmp_path: Path) -> None:
    first = write(
        tmp_path / "a",
        clusters=[("c", {"server": "https://first"})],
        contexts=[("ctx", {"cluster": "c"})],
        current="ctx",
    )
    second = write(
        tmp_path / "b",
        clusters=[("c", {"server": "https://second"}), ("d", {"server": "http://other:8080"})],
        contexts=[("other", {"cluster": "d"})],
        current="other",
    )
    assert clientconfig.from_kubeconfig([first, second]).server == "https://first"
    chosen = clientconfig.from_kubeconfig([first, second], context="other")
    assert (chosen.server, chosen.credentials) == ("http://other:8080", None)


def test_kubeconfig_paths_and_load_choose_as_kubectl_does(tmp_path: Path) -> None:
    path = one(tmp_path / "config", {"server": "https://k"}, {"token": "t"})
    missing = tmp_path / "missing"
    environ = {"KUBECONFIG": f"{missing}:{path}"}
    assert clientconfig.kubeconfig_paths(None, environ=environ) == [missing, path]
    assert clientconfig.kubeconfig_paths(path, environ=environ) == [path]
    assert clientconfig.kubeconfig_paths(None, environ={})[0].name == "config"
    settings = ClientSettings()
    assert clientconfig.load(settings, environ=environ).server == "https://k"  # the missing file is skipped
    with pytest.raises(ConfigError, match="not running in a pod"):
        clientconfig.load(settings, environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"})  # no port


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.unlink(), "no such file"),
        (lambda p: p.write_text("[1, 2]"), "expected a mapping"),
        (lambda p: p.write_text("clusters: {"), "cannot read it"),
        (lambda p: write(p, clusters=[("c", {"server": "https://k"})]), "no current-context"),
        (lambda p: write(p, current="nope"), "no context named 'nope'"),
        (lambda p: write(p, contexts=[("x", {"cluster": "c"})], current="x"), "cluster 'c', which is not defined"),
        (
            lambda p: write(p, clusters=[("c", {"server": "k:6443"})], contexts=[("x", {"cluster": "c"})], current="x"),
            "must start with https:// or http://",
        ),
        (
            lambda p: one(p, {"server": "https://k"}, {"client-certificate": "me.crt"}),
            "needs its client-key",
        ),
        (lambda p: one(p, {"server": "https://k"}, {"tokenFile": "absent"}), "tokenFile"),
        (lambda p: one(p, {"server": "https://k", "certificate-authority-data": "!!"}), "is not base64"),
        (lambda p: one(p, {"server": 6443}), "server must be a string"),
    ],
    ids=[
        "missing",
        "not-a-mapping",
        "bad-yaml",
        "no-current",
        "unknown-context",
        "unknown-cluster",
        "no-scheme",
        "cert-without-key",
        "token-file-missing",
        "bad-base64",
        "server-not-text",
    ],
)
def test_a_broken_kubeconfig_is_a_precise_config_error(tmp_path: Path, change: Any, message: str) -> None:
    path = one(tmp_path / "config", {"server": "https://k"})
    change(path)
    with pytest.raises(ConfigError, match=message) as e:
        clientconfig.from_kubeconfig([path])
    assert str(path) in str(e.value)


def test_in_cluster_reads_the_service_account(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("CA")
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    config = clientconfig.in_cluster(environ=environ, directory=tmp_path)
    assert config.server == "https://[fd00::1]:443" and config.tls.ca_file == tmp_path / "ca.crt"
    assert config.credentials is not None and config.credentials.authorization() == "Bearer sa-token"
    (tmp_path / "ca.crt").write_text("")
    with pytest.raises(ConfigError, match="CA file .* is empty"):
        clientconfig.in_cluster(environ=environ, directory=tmp_path)
    (tmp_path / "token").unlink()
    with pytest.raises(ConfigError, match="in-cluster configuration"):
        clientconfig.in_cluster(environ=environ, directory=tmp_path)
