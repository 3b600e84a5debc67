"""The agent's runtime hooks: plugins that adjust pods and containers as the runtime proxy creates them.

The agent process builds the plugins and hosts them in a `HookServer`; see `server.py` for the
calls and `plugin.py` for the interface a plugin implements.
"""

from agent.hooks.collision import DeviceCollisionPlugin
from agent.hooks.gpu import GPUEnvPlugin
from agent.hooks.plugin import HookError, HookNotReady, HookPlugin, HookRefused
from agent.hooks.rdma import RDMADevicesPlugin
from agent.hooks.server import DEFAULT_SOCKET, HookServer

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
