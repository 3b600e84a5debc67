"""Reaching the live scheduler's gRPC API from a command: the flags and the channel.

`tessera explain` and `tessera deschedule` both talk to `tessera.scheduler.v1.Scheduler`: the
address is `--scheduler ADDRESS`, else `$TESSERA_SCHEDULER_ADDRESS`, else the well-known unix
socket `tessera scheduler` serves on for this user; TLS (and a client certificate) on request.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import grpc

from scheduler.service import ADDRESS_ENV, Endpoint, default_address

__all__ = ["add_arguments", "address", "connect"]


def add_arguments(parser: argparse.ArgumentParser, *, timeout: float = 10.0) -> None:
    """`--scheduler`, `--tls-ca`, `--tls-cert`, `--tls-key` and `--timeout` (default `timeout`)."""
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help=f"the scheduler's gRPC API (default ${ADDRESS_ENV}, else {default_address({})} for this user)",
    )
    parser.add_argument("--tls-ca", type=Path, metavar="FILE", help="connect with TLS, trusting this CA")
    parser.add_argument("--tls-cert", type=Path, metavar="FILE", help="client certificate (mutual TLS)")
    parser.add_argument("--tls-key", type=Path, metavar="FILE", help="client certificate's key")
    parser.add_argument(
        "--timeout", type=float, default=timeout, metavar="SECONDS", help=f"per request (default {timeout:g})"
    )


def address(args: argparse.Namespace) -> Endpoint:
    """Where to dial. Raises ConfigError for an address that cannot be parsed."""
    return Endpoint.parse(args.scheduler or default_address(dict(os.environ)))


def connect(endpoint: Endpoint, args: argparse.Namespace) -> grpc.Channel:
    """A channel to `endpoint`, with TLS when asked. Raises OSError when a file cannot be read."""
    if args.tls_ca is None and args.tls_cert is None:
        return grpc.insecure_channel(endpoint.target)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=args.tls_ca.read_bytes() if args.tls_ca else None,
        private_key=args.tls_key.read_bytes() if args.tls_key else None,
        certificate_chain=args.tls_cert.read_bytes() if args.tls_cert else None,
    )
    return grpc.secure_channel(endpoint.target, credentials)
