"""The CRI runtime proxy: kubelet → proxy → containerd, with runtime hooks in between.

Runs as its own process (`tessera runtime-proxy`). See docs/runtime-proxy.md for installing it on
a node, and the modules for the parts: `intercept` (which CRI calls run which hooks), `merge`
(how answers change requests), `dispatch` (failure policies), `hookconfig` (config files),
`state` (sandboxes and containers by id, recovered from the runtime), `passthrough` (everything
else, as raw bytes).
"""

from runtimeproxy.hookconfig import FailurePolicy, HookServerConfig, HookType
from runtimeproxy.server import RuntimeProxy, run
from runtimeproxy.settings import ProxySettings

__all__ = ["FailurePolicy", "HookServerConfig", "HookType", "ProxySettings", "RuntimeProxy", "run"]
