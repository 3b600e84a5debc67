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

from collections.abc import Sequence
from pathlib import Path

from agent.hooks import DEFAULT_SOCKET
from agent.hooks.plugin import HookPlugin
from agent.hooks.service import RuntimeHookService
from kube.unixsocket import UnixServer

__all__ = ["HookServer"]


class HookServer(UnixServer):
    """Serves `plugins` as RuntimeHookService on `socket_path`; start()/stop(), or a context manager."""

    kind = "hook server"

    def __init__(
        self,
        plugins: Sequence[HookPlugin],
        *,
        socket_path: Path = DEFAULT_SOCKET,
        mode: int = 0o600,
        max_workers: int = 8,
    ) -> None:
        self.plugins = tuple(plugins)
        handlers = [RuntimeHookService(self.plugins).handler()]
        super().__init__(socket_path, handlers, mode=mode, max_workers=max_workers)
