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
from concurrent import futures
from types import FrameType, TracebackType

import grpc

from agent import unixsocket
from agent.runtimeproxy.dispatch import Dispatcher
from agent.runtimeproxy.hookclient import HookClient
from agent.runtimeproxy.hookconfig import HookConfigDir
from agent.runtimeproxy.intercept import HookedRuntime
from agent.runtimeproxy.passthrough import Passthrough
from agent.runtimeproxy.settings import ProxySettings
from agent.runtimeproxy.state import PodStore
from agent.runtimeproxy.upstream import CHANNEL_OPTIONS, Upstream
from apis.errors import ConfigError

__all__ = ["RuntimeProxy", "run"]

log = logging.getLogger(__name__)


class RuntimeProxy:
    """One proxy instance; `start()` returns at once, gRPC serves in its own threads."""

    def __init__(self, settings: ProxySettings) -> None:
        settings.validate()
        self.settings = settings
        self._server: grpc.Server | None = None
        self._upstream: Upstream | None = None
        self._hook_client: HookClient | None = None

    @property
    def address(self) -> str:
        """The gRPC target kubelet (or a test) dials."""
        return unixsocket.target(str(self.settings.listen))

    def start(self) -> None:
        """Bind the listen socket and serve. Raises ConfigError if the socket cannot be taken."""
        if self._server is not None:
            return
        s = self.settings
        unixsocket.claim(s.listen)
        upstream = Upstream(s.runtime_endpoint, s.image_endpoint)
        hook_client = HookClient(timeout_s=s.hook_timeout_s)
        dispatcher = Dispatcher(HookConfigDir(s.hook_config_dir, rescan_interval_s=s.config_rescan_s), hook_client)
        hooked = HookedRuntime(upstream, PodStore(upstream.runtime, timeout_s=s.lookup_timeout_s), dispatcher)
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=s.max_workers, thread_name_prefix="runtime-proxy"),
            handlers=[hooked.handler(), Passthrough(upstream)],
            options=CHANNEL_OPTIONS,
        )
        try:
            server.add_insecure_port(self.address)
        except RuntimeError as e:
            upstream.close()
            raise ConfigError(f"runtime proxy: cannot listen on {s.listen}: {e}") from e
        server.start()
        unixsocket.restrict(s.listen, s.socket_mode)
        self._server, self._upstream, self._hook_client = server, upstream, hook_client
        log.info(
            "Runtime proxy listening",
            extra={"listen": str(s.listen), "runtime": s.runtime_endpoint, "hook_config_dir": str(s.hook_config_dir)},
        )

    def stop(self, grace_s: float | None = 2.0) -> None:
        """Stop serving (in-flight calls get `grace_s` seconds), close channels, remove the socket."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stop(grace_s).wait()
        if self._upstream is not None:
            self._upstream.close()
        if self._hook_client is not None:
            self._hook_client.close()
        unixsocket.release(self.settings.listen)
        log.info("Runtime proxy stopped", extra={"listen": str(self.settings.listen)})

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the proxy stops (True) or `timeout_s` passes (False)."""
        return self._server is None or bool(self._server.wait_for_termination(timeout_s))

    def __enter__(self) -> RuntimeProxy:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def run(settings: ProxySettings) -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit code. Must run in the main thread."""
    proxy = RuntimeProxy(settings)
    proxy.start()
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("Stopping on signal", extra={"signal": signal.Signals(signum).name})
        stopping.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    try:
        stopping.wait()
    finally:
        proxy.stop()
    return 0
