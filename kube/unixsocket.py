"""gRPC on unix sockets for the agent: a server that owns its socket file, and endpoint names.

The hook server (in the agent process) and the runtime proxy both serve gRPC on a unix socket and
call peers given as a path or a `unix://` URL, the way kubelet and Koordinator's config files
spell endpoints. A socket file left behind by a crashed process is replaced; one that a live
process still serves is never taken over.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import stat
from collections.abc import Sequence
from concurrent import futures
from pathlib import Path
from types import TracebackType
from typing import Final, Self

import grpc

from apis.errors import ConfigError

__all__ = ["UnixServer", "claim", "path_of", "release", "target"]

log = logging.getLogger(__name__)

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


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True


class UnixServer:
    """A gRPC server on a unix socket, serving `handlers` in a thread pool; also a context manager.

    `start()` claims the path, binds, serves and sets the socket's mode; `stop()` ends serving and
    removes the socket file. Subclasses name themselves with `kind` in logs.
    """

    kind: str = "gRPC server"

    def __init__(
        self,
        socket_path: Path,
        handlers: Sequence[grpc.GenericRpcHandler],
        *,
        mode: int,
        max_workers: int,
        options: Sequence[tuple[str, int]] = (),
    ) -> None:
        self.socket_path = socket_path
        self._handlers = tuple(handlers)
        self._mode = mode
        self._max_workers = max_workers
        self._options = tuple(options)
        self._server: grpc.Server | None = None

    @property
    def address(self) -> str:
        """The gRPC target clients dial (`unix:///path`)."""
        return target(str(self.socket_path))

    def start(self) -> None:
        """Bind and serve in background threads; returns at once. Raises ConfigError if it cannot bind."""
        if self._server is not None:
            return
        claim(self.socket_path)
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix=self.kind.replace(" ", "-")),
            handlers=list(self._handlers),
            options=self._options,
        )
        try:
            server.add_insecure_port(self.address)
        except RuntimeError as e:
            raise ConfigError(f"{self.kind}: cannot listen on {self.socket_path}: {e}") from e
        server.start()
        os.chmod(self.socket_path, self._mode)
        self._server = server
        log.info("Serving", extra={"server": self.kind, "socket": str(self.socket_path)})

    def stop(self, grace_s: float | None = 1.0) -> None:
        """Stop serving (in-flight calls get `grace_s` seconds) and remove the socket. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stop(grace_s).wait()
        release(self.socket_path)
        log.info("Stopped serving", extra={"server": self.kind, "socket": str(self.socket_path)})

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the server stops (True) or `timeout_s` passes (False)."""
        return self._server is None or bool(self._server.wait_for_termination(timeout_s))

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
