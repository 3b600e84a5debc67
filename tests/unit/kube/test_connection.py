"""kube.restconfig's token file and kube.connection's TLS context and proxy choice."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import urllib3

from apis.errors import ConfigError
from kube import connection, errors
from kube.pki import CA
from kube.restconfig import RESTConfig, TLSConfig, TokenFile


def test_a_token_file_is_read_again_once_its_period_has_passed(tmp_path: Path) -> None:
    path = tmp_path / "token"
    now = [0.0]
    token = TokenFile(path, period_s=60, clock=lambda: now[0])
    with pytest.raises(errors.Unauthorized, match="cannot read the bearer token"):
        token.authorization()
    path.write_text("one\n")
    assert token.authorization() == "Bearer one"
    path.write_text("two")
    now[0] = 59.0
    assert token.authorization() == "Bearer one"  # within the period: no read
    now[0] = 60.0
    assert token.authorization() == "Bearer two"
    path.write_text("")  # being rewritten: the last good token is kept
    now[0] = 200.0
    assert token.authorization() == "Bearer two"
    path.write_text("three")
    now[0] = 200.1
    assert token.authorization() == "Bearer three"  # tried again on the next request


@pytest.mark.parametrize(
    ("server", "environ", "expected"),
    [
        ("https://k:6443", {"HTTPS_PROXY": "http://p:3128"}, "http://p:3128"),
        ("https://k:6443", {"https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:2"}, "http://lower:1"),
        ("http://k:8080", {"HTTPS_PROXY": "http://p:3128"}, ""),
        ("http://k:8080", {"ALL_PROXY": "socks5://p:1080"}, "socks5://p:1080"),
        ("https://k:6443", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "other,k"}, ""),
        ("https://api.example.com", {"HTTPS_PROXY": "http://p", "NO_PROXY": ".example.com"}, ""),
        ("https://api.example.com", {"HTTPS_PROXY": "http://p", "NO_PROXY": "example.com"}, ""),
        ("https://notexample.com", {"HTTPS_PROXY": "http://p", "NO_PROXY": "example.com"}, "http://p"),
        ("https://10.1.2.3:6443", {"HTTPS_PROXY": "http://p", "NO_PROXY": "10.0.0.0/8"}, ""),
        ("https://[fd00::1]:6443", {"HTTPS_PROXY": "http://p", "NO_PROXY": "fd00::/8"}, ""),
        ("https://k:6443", {"HTTPS_PROXY": "http://p", "NO_PROXY": "k:443"}, "http://p"),
        ("https://k:6443", {"HTTPS_PROXY": "http://p", "NO_PROXY": "k:6443"}, ""),
        ("https://k:6443", {"HTTPS_PROXY": "http://p", "NO_PROXY": "*"}, ""),
    ],
    ids=[
        "https",
        "lower-case-wins",
        "scheme-matters",
        "all-proxy",
        "no-proxy-name",
        "no-proxy-dot-suffix",
        "no-proxy-suffix",
        "suffix-needs-a-dot",
        "no-proxy-cidr",
        "no-proxy-ipv6-cidr",
        "no-proxy-other-port",
        "no-proxy-port",
        "no-proxy-star",
    ],
)
def test_the_environment_proxy_is_chosen_as_client_go_does(server: str, environ: dict[str, str], expected: str) -> None:
    assert connection.proxy_for(RESTConfig(server), environ=environ) == expected


def test_the_kubeconfig_proxy_wins_over_the_environment() -> None:
    config = RESTConfig("https://k", proxy_url="http://from-kubeconfig:3128")
    assert connection.proxy_for(config, environ={"HTTPS_PROXY": "http://env", "NO_PROXY": "*"}) == config.proxy_url
    assert isinstance(connection.pool_manager(config, maxsize=1), urllib3.ProxyManager)


def test_the_tls_context_loads_the_ca_and_a_client_certificate_given_as_data(tmp_path: Path) -> None:
    ca = CA.create()
    client = ca.issue("tessera-agent", client=True)
    context = connection.ssl_context(TLSConfig(ca_data=ca.pem, cert_data=client.cert_pem, key_data=client.key_pem))
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "tessera-test-ca"),),)]
    cert, key = client.write(tmp_path / "client")
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(ca.pem)
    assert connection.ssl_context(TLSConfig(ca_file=ca_file, cert_file=cert, key_file=key)).get_ca_certs()
    assert connection.ssl_context(TLSConfig(insecure=True)).verify_mode == ssl.CERT_NONE


def test_tls_files_that_do_not_load_are_config_errors(tmp_path: Path) -> None:
    ca = CA.create()
    with pytest.raises(ConfigError, match="kubeconfig x: cannot load the certificate authority"):
        connection.ssl_context(TLSConfig(ca_file=tmp_path / "absent.crt"), source="kubeconfig x")
    with pytest.raises(ConfigError, match="cannot load the certificate authority"):
        connection.ssl_context(TLSConfig(ca_data=b"not a certificate"))
    other = CA.create().issue("someone", client=True)
    mismatched = TLSConfig(ca_data=ca.pem, cert_data=ca.issue("me", client=True).cert_pem, key_data=other.key_pem)
    with pytest.raises(ConfigError, match="cannot load the client certificate and key"):
        connection.ssl_context(mismatched)
