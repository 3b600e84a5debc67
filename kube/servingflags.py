"""The serving flags of the components that answer `/healthz`, `/readyz` and `/metrics`, declared once.

`tessera controller`, `tessera descheduler`, `tessera kube-controller-manager` and `tessera
dashboard` each serve HTTP on `--listen HOST:PORT` (port 0: any free port) and, with
`--listen-address-file`, write the bound address there once serving, which is how a parent
process (`tessera up`, the tests' launchers) finds a port 0 choice. They take the same flags,
spell a bad value the same way (`--listen 'x': expected HOST:PORT`) and differ only in their
default address, so the flags and their parsing live here (like `kube.leaderelectionflags`).

`add_arguments(parser, default=...)` declares them; `settings_from(args)` turns the parsed flags
into a `kube.serving.ServingSettings`, which the component's settings validate with the rest.
`host_port(flag, value)` reads any other `HOST:PORT` flag the same way (the controller's
`--webhook-bind-address`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from apis.errors import ConfigError
from kube.serving import ServingSettings
from kube.servingtls import TLSServing

__all__ = ["add_arguments", "add_tls_arguments", "host_port", "settings_from", "tls_from"]


def add_arguments(
    parser: argparse.ArgumentParser, *, default: ServingSettings, what: str = "/healthz, /readyz and /metrics"
) -> None:
    """Add `--listen` (defaulting to `default`'s address) and `--listen-address-file`; `what` is
    what the address serves, for the help."""
    address = f"{default.host}:{default.port}"
    parser.add_argument(
        "--listen",
        default=address,
        metavar="HOST:PORT",
        help=f"address of {what} (default {address}; port 0: any)",
    )
    parser.add_argument(
        "--listen-address-file", type=Path, metavar="PATH", help="write the bound HOST:PORT here once serving"
    )
    add_tls_arguments(parser)


def add_tls_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--tls-cert-file`, `--tls-private-key-file` and `--tls-self-signed` (kube.servingtls): HTTPS
    for the operational port, whose callers send bearer tokens."""
    parser.add_argument("--tls-cert-file", type=Path, metavar="FILE", help="serve HTTPS with this certificate")
    parser.add_argument("--tls-private-key-file", type=Path, metavar="FILE", help="the certificate's private key")
    parser.add_argument(
        "--tls-self-signed",
        action="store_true",
        help="serve HTTPS with a certificate made at start (as kube-scheduler without --tls-cert-file)",
    )


def tls_from(args: argparse.Namespace) -> TLSServing:
    """The flags `add_tls_arguments` added; raises ConfigError for a half-given pair."""
    tls = TLSServing(args.tls_cert_file, args.tls_private_key_file, args.tls_self_signed)
    tls.validate()
    return tls


def host_port(flag: str, value: str, *, default_host: str = "0.0.0.0") -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:80` for IPv6) as (host, port); an empty host is `default_host`.
    Raises ConfigError naming `flag` when there is no numeric port."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"{flag} {value!r}: expected HOST:PORT")
    return host.strip("[]") or default_host, int(port)


def settings_from(args: argparse.Namespace, *, default_host: str = "0.0.0.0") -> ServingSettings:
    """The flags `add_arguments` added, as settings; raises ConfigError naming the flag for an
    address without a port. The port's range is `ServingSettings.validate`'s to check, which the
    component's settings call first among their checks."""
    host, port = host_port("--listen", args.listen, default_host=default_host)
    return ServingSettings(host=host, port=port, address_file=args.listen_address_file, tls=tls_from(args))
