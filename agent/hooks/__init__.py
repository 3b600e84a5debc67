"""The agent's runtime hooks: plugins that adjust pods and containers as the runtime proxy creates them.

The agent process builds the plugins and hosts them in a `HookServer`; see `server.py` for the
calls and `plugin.py` for the interface a plugin implements.

Names load on first use (`kube.lazyexports`): the server needs gRPC and the plugins the
runtime API's protobuf messages (about 14 MiB together), which an agent without a hook server
(`--no-hook-server`) never loads. `DEFAULT_SOCKET` lives here so that the agent's settings can
name it without importing the server.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from kube.lazyexports import lazy_exports

if TYPE_CHECKING:
    from agent.hooks.collision import DeviceCollisionPlugin
    from agent.hooks.gpu import GPUEnvPlugin
    from agent.hooks.plugin import HookError, HookNotReady, HookPlugin, HookRefused
    from agent.hooks.rdma import RDMADevicesPlugin
    from agent.hooks.server import HookServer

#: Where the hook server listens unless told (`--hook-socket`), and where the runtime proxy calls.
DEFAULT_SOCKET: Final = Path("/var/run/tessera/agent.sock")

_EXPORTS = {
    "DeviceCollisionPlugin": "agent.hooks.collision",
    "GPUEnvPlugin": "agent.hooks.gpu",
    "HookError": "agent.hooks.plugin",
    "HookNotReady": "agent.hooks.plugin",
    "HookPlugin": "agent.hooks.plugin",
    "HookRefused": "agent.hooks.plugin",
    "HookServer": "agent.hooks.server",
    "RDMADevicesPlugin": "agent.hooks.rdma",
}

__all__ = [
    "DEFAULT_SOCKET",
    "DeviceCollisionPlugin",
    "GPUEnvPlugin",
    "HookError",
    "HookNotReady",
    "HookPlugin",
    "HookRefused",
    "HookServer",
    "RDMADevicesPlugin",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
