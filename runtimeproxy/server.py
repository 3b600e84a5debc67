"""The runtime proxy: a CRI server between kubelet and the container runtime.

`RuntimeProxy(settings)` wires the parts (upstream channels, pod store, hook config directory,
hook client, dispatcher) into one gRPC server on a unix socket: the intercepted RuntimeService
methods first, then the raw-bytes passthrough for everything else. `run(settings)` is what
`tessera runtime-proxy` calls: serve until SIGTERM or SIGINT.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from kube.lifecycle import wait_until_set
from kube.unixsocket import UnixServer
from runtimeproxy.cdi import CDIRegistry
from runtimeproxy.dispatch import Dispatcher
from runtimeproxy.hookclient import HookClient
from runtimeproxy.hookconfig import HookConfigDir
from runtimeproxy.intercept import HookedRuntime
from runtimeproxy.passthrough import Passthrough
from runtimeproxy.settings import ProxySettings
from runtimeproxy.state import PodStore
from runtimeproxy.upstream import CHANNEL_OPTIONS, Upstream

__all__ = ["RuntimeProxy", "run"]

log = logging.getLogger(__name__)


class RuntimeProxy(UnixServer):
    """One proxy instance; `start()` returns at once, gRPC serves in its own threads.

    Connections to the runtime and to hook servers are made lazily and closed by `stop()`; a
    stopped proxy is not started again (make a new one).
    """

    kind = "runtime proxy"

    def __init__(self, settings: ProxySettings) -> None:
        settings.validate()
        self.settings = settings
        self._upstream = Upstream(settings.runtime_endpoint, settings.image_endpoint)
        self._hook_client = HookClient(timeout_s=settings.hook_timeout_s)
        configs = HookConfigDir(settings.hook_config_dir, rescan_interval_s=settings.config_rescan_s)
        store = PodStore(self._upstream.runtime, timeout_s=settings.lookup_timeout_s)
        registry = CDIRegistry(settings.cdi_spec_dirs) if settings.apply_cdi else None
        hooked = HookedRuntime(self._upstream, store, Dispatcher(configs, self._hook_client), cdi_registry=registry)
        super().__init__(
            settings.listen,
            [hooked.handler(), Passthrough(self._upstream)],
            mode=settings.socket_mode,
            max_workers=settings.max_workers,
            options=CHANNEL_OPTIONS,
        )

    def stop(self, grace_s: float | None = 2.0) -> None:
        """Stop serving (in-flight calls get `grace_s` seconds), remove the socket, close channels."""
        super().stop(grace_s)
        self._upstream.close()
        self._hook_client.close()


def run(settings: ProxySettings) -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit code. Must run in the main thread."""
    proxy = RuntimeProxy(settings)
    proxy.start()
    log.info(
        "Runtime proxy running",
        extra={"runtime": settings.runtime_endpoint, "hook_config_dir": str(settings.hook_config_dir)},
    )
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("Stopping on signal", extra={"signal": signal.Signals(signum).name})
        stopping.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    try:
        wait_until_set(stopping)
    finally:
        proxy.stop()
    return 0
