"""Unix sockets for the agent's gRPC servers: claiming a path to serve on, and naming targets.

Both the hook server (in the agent process) and the runtime proxy serve gRPC on a unix socket
and call peers given as a path or a `unix://` URL, the way kubelet and Koordinator's config
files spell endpoints. A socket file left behind by a crashed process is replaced; one that a
live process still serves is never taken over.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from pathlib import Path
from typing import Final

from apis.errors import ConfigError

__all__ = ["claim", "path_of", "release", "restrict", "target"]

_SCHEME: Final = "unix://"


def path_of(endpoint: str) -> Path:
    """The socket path of an endpoint given as `/path`, `unix:///path` or `unix:/path`.

    Raises ConfigError for anything else (a TCP address, a relative path).
    """
    text = endpoint.strip()
    if text.startswith(_SCHEME):
        text = text[len(_SCHEME) :]
    elif text.startswith("unix:"):
        text = text[len("unix:") :]
    if not text.startswith("/"):
        raise ConfigError(f"endpoint {endpoint!r}: expected an absolute unix socket path or unix:///path")
    return Path(text)


def target(endpoint: str) -> str:
    """The gRPC target (`unix:///path`) for an endpoint accepted by `path_of`."""
    return f"{_SCHEME}{path_of(endpoint)}"


def claim(path: Path) -> None:
    """Make `path` ready to bind: create the parent directory, remove a stale socket file.

    Raises ConfigError when the path is something other than a socket, or a live server answers
    on it (two agents or two proxies on one node is a deployment error, not something to win).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConfigError(f"{path}: exists and is not a unix socket; refusing to replace it")
    if _answers(path):
        raise ConfigError(f"{path}: another process is already serving on this socket")
    path.unlink()


def release(path: Path) -> None:
    """Remove the socket file if it is still a socket (idempotent)."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()


def restrict(path: Path, mode: int) -> None:
    """Set the socket file's permission bits (e.g. 0o600: only root may call the agent)."""
    os.chmod(path, mode)


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True
