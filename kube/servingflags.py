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

__all__ = ["add_arguments", "host_port", "settings_from"]


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
    return ServingSettings(host=host, port=port, address_file=args.listen_address_file)
