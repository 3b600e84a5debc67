"""The hook server: the agent's RuntimeHookService on a unix socket.

The node agent process hosts it: it builds the plugins (GPU env, RDMA devices, QoS, ...) and
hands them over, then starts and stops the server with the agent:

    server = HookServer([GPUEnvPlugin(), RDMADevicesPlugin(sysfs_root=...), qos_plugin])
    server.start()            # serves in gRPC's own threads; returns at once
    ...
    server.stop()

The socket (default `/var/run/tessera/agent.sock`) is created with mode 0600, so only root,
which the runtime proxy runs as, can call it. A stale socket from a crashed agent is replaced; a
live one makes `start()` raise ConfigError.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent import futures
from pathlib import Path
from types import TracebackType
from typing import Final

import grpc

from agent import unixsocket
from agent.hooks.plugin import HookPlugin
from agent.hooks.service import RuntimeHookService
from apis.errors import ConfigError

__all__ = ["DEFAULT_SOCKET", "HookServer"]

log = logging.getLogger(__name__)

DEFAULT_SOCKET: Final = Path("/var/run/tessera/agent.sock")


class HookServer:
    """Serves `plugins` as RuntimeHookService on `socket_path`; also a context manager."""

    def __init__(
        self,
        plugins: Sequence[HookPlugin],
        *,
        socket_path: Path = DEFAULT_SOCKET,
        mode: int = 0o600,
        max_workers: int = 8,
    ) -> None:
        self.socket_path = socket_path
        self.plugins = tuple(plugins)
        self._mode = mode
        self._max_workers = max_workers
        self._server: grpc.Server | None = None

    @property
    def address(self) -> str:
        """The gRPC target clients dial (`unix:///path`)."""
        return unixsocket.target(str(self.socket_path))

    def start(self) -> None:
        """Bind the socket and start serving in background threads. Raises ConfigError if it cannot bind."""
        if self._server is not None:
            return
        unixsocket.claim(self.socket_path)
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="hook-server"),
            handlers=[RuntimeHookService(self.plugins).handler()],
        )
        try:
            server.add_insecure_port(self.address)
        except RuntimeError as e:
            raise ConfigError(f"hook server: cannot listen on {self.socket_path}: {e}") from e
        server.start()
        unixsocket.restrict(self.socket_path, self._mode)
        self._server = server
        log.info(
            "Hook server listening",
            extra={"socket": str(self.socket_path), "plugins": ",".join(p.name for p in self.plugins)},
        )

    def stop(self, grace_s: float | None = 1.0) -> None:
        """Stop serving (in-flight calls get `grace_s` seconds) and remove the socket. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stop(grace_s).wait()
        unixsocket.release(self.socket_path)
        log.info("Hook server stopped", extra={"socket": str(self.socket_path)})

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the server stops (True) or `timeout_s` passes (False)."""
        return self._server is None or bool(self._server.wait_for_termination(timeout_s))

    def __enter__(self) -> HookServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
