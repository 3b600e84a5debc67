"""The serving flag set: each component's default address, IPv6 brackets, the address file, and a
value without a port or with one out of range refused with the flag named."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from apis.errors import ConfigError
from kube import servingflags
from kube.serving import ServingSettings
from kube.servingtls import TLSServing

DEFAULT = ServingSettings(host="127.0.0.1", port=10257)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    servingflags.add_arguments(parser, default=DEFAULT)
    return parser.parse_args(argv)


def test_the_components_default() -> None:
    assert servingflags.settings_from(parse()) == DEFAULT


def test_every_flag_reaches_its_setting() -> None:
    settings = servingflags.settings_from(parse("--listen", "[::1]:0", "--listen-address-file", "/run/a"))
    assert settings == ServingSettings(host="::1", port=0, address_file=Path("/run/a"))


@pytest.mark.parametrize(("default_host", "expected"), [("0.0.0.0", "0.0.0.0"), ("127.0.0.1", "127.0.0.1")])
def test_an_empty_host_is_the_default_host(default_host: str, expected: str) -> None:
    assert servingflags.settings_from(parse("--listen", ":80"), default_host=default_host).host == expected


@pytest.mark.parametrize("value", ["9318", "host:", "host:http", ""])
def test_an_address_without_a_port_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match=rf"^--listen '{value}': expected HOST:PORT$"):
        servingflags.settings_from(parse("--listen", value))


def test_other_flags_name_themselves() -> None:
    assert servingflags.host_port("--webhook-bind-address", "[::]:9443") == ("::", 9443)
    with pytest.raises(ConfigError, match="^--webhook-bind-address 'x': expected HOST:PORT$"):
        servingflags.host_port("--webhook-bind-address", "x")


@pytest.mark.parametrize(("port", "ok"), [(0, True), (65535, True), (65536, False)])
def test_the_port_range_is_validated(port: int, ok: bool) -> None:
    settings = servingflags.settings_from(parse("--listen", f"0.0.0.0:{port}"))
    if ok:
        settings.validate()
        return
    with pytest.raises(ConfigError, match=f"^--listen port {port}: must be in 0..65535$"):
        settings.validate()


def test_tls_flags_reach_their_setting_and_a_half_pair_is_refused() -> None:
    assert servingflags.settings_from(parse("--tls-self-signed")).tls == TLSServing(self_signed=True)
    pair = parse("--tls-cert-file", "/c.crt", "--tls-private-key-file", "/c.key")
    assert servingflags.settings_from(pair).tls == TLSServing(Path("/c.crt"), Path("/c.key"))
    with pytest.raises(ConfigError, match="go together"):
        servingflags.settings_from(parse("--tls-cert-file", "/c.crt"))
    with pytest.raises(ConfigError, match="give one, not both"):
        servingflags.settings_from(parse("--tls-self-signed", "--tls-cert-file", "/c", "--tls-private-key-file", "/k"))
