"""`tessera apiserver`: the embedded Kubernetes API server (see docs/user/apiserver.md).

Thin: flags become `APIServerSettings`; `apiserver.run` does the rest.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import apiserver
from apis.errors import ConfigError
from apiserver import APIServerSettings, WatchSettings
from apiserver.flowcontrol import FlowSettings


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "tessera" / "apiserver"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen", default="127.0.0.1:6443", metavar="HOST:PORT", help="address to serve on (port 0 picks a free one)"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"SQLite data directory (default {_default_data_dir()})",
    )
    parser.add_argument(
        "--in-memory", action="store_true", help="keep objects in memory only (nothing survives a restart)"
    )
    parser.add_argument("--kubeconfig-out", type=Path, metavar="PATH", help="write a kubeconfig for clients here")
    parser.add_argument(
        "--token-file",
        type=Path,
        metavar="PATH",
        help="require this bearer token (created with a random token if the file does not exist)",
    )
    parser.add_argument(
        "--token-auth-file",
        type=Path,
        metavar="PATH",
        help='more identities, one `token,user,uid,"group1,group2"` line each (kube\'s static token file); '
        "with --token-file, requests are authorized by RBAC",
    )
    parser.add_argument(
        "--cert-dir", type=Path, metavar="DIR", help="TLS CA and serving certificate (default DATA_DIR/pki)"
    )
    parser.add_argument(
        "--watch-window", type=int, default=10_000, metavar="N", help="events kept per resource for watch resume"
    )
    parser.add_argument(
        "--bookmark-interval", type=float, default=10.0, metavar="SECONDS", help="watch bookmark period"
    )
    parser.add_argument(
        "--request-header-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="close a connection that has not sent a whole request header within this long (also the idle timeout)",
    )
    parser.add_argument("--max-connections", type=int, default=1024, metavar="N", help="open connections at most")
    parser.add_argument(
        "--max-requests-inflight",
        type=int,
        default=400,
        metavar="N",
        help="seats shared by the priority levels (half system, a quarter each workload-low and global-default)",
    )
    parser.add_argument(
        "--max-watches-per-user", type=int, default=1000, metavar="N", help="open watches per user (not system:masters)"
    )


def _token(path: Path | None) -> str | None:
    if path is None:
        return None
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(apiserver.new_token() + "\n")
    token = path.read_text().strip()
    if not token:
        raise ConfigError(f"token file {path} is empty")
    return token


def _flow_settings(seats: int, watches: int) -> FlowSettings:
    if seats < 4 or watches < 1:
        raise ConfigError("--max-requests-inflight must be at least 4 and --max-watches-per-user at least 1")
    return FlowSettings(
        system_seats=seats // 2,
        workload_seats=seats // 4,
        default_seats=seats // 4,
        max_watches_per_user=watches,
    )


def settings_from(args: argparse.Namespace) -> APIServerSettings:
    """The validated settings; raises ConfigError for flags that cannot work."""
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"--listen {args.listen!r}: expected HOST:PORT")
    settings = APIServerSettings(
        host=host.strip("[]"),
        port=int(port),
        data_dir=None if args.in_memory else (args.data_dir or _default_data_dir()),
        kubeconfig_out=args.kubeconfig_out,
        token=_token(args.token_file),
        token_auth_file=args.token_auth_file,
        cert_dir=args.cert_dir,
        watch_window=args.watch_window,
        watch=WatchSettings(bookmark_interval=args.bookmark_interval),
        request_header_timeout=args.request_header_timeout,
        max_connections=args.max_connections,
        flow=_flow_settings(args.max_requests_inflight, args.max_watches_per_user),
    )
    settings.validate()
    return settings


def run(args: argparse.Namespace) -> int:
    """Flags that cannot work raise ConfigError: `tessera apiserver: reason`, exit code 2 (cli.main)."""
    return apiserver.run(settings_from(args))
