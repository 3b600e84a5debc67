"""Run `tessera runtime-proxy` as a child process, as a node runs it: for tests and benchmarks.

    proxy = RuntimeProxyProcess(ProxySettings(listen=..., runtime_endpoint=..., hook_config_dir=...),
                                log_path=workdir / "proxy.log")
    proxy.start()            # returns once the proxy answers CRI Version on its socket
    ...                      # kubelet's calls go to unix://<listen>
    assert proxy.stop() == 0

`answers_cri(socket)` is the readiness check, also for other CRI servers (containerd).
"""

from __future__ import annotations

from pathlib import Path

import grpc
from cri_api.v1 import api_pb2 as cri
from cri_api.v1 import api_pb2_grpc as cri_grpc

from kube.process import ComponentProcess
from runtimeproxy.settings import ProxySettings

__all__ = ["RuntimeProxyProcess", "answers_cri"]


def answers_cri(socket: Path) -> bool:
    """Whether a CRI server answers `Version` on `socket` now (within a second).

    A fresh channel per call: one channel retrying during a server's start-up backs off for
    seconds, a new one connects at once.
    """
    if not socket.exists():
        return False
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        try:
            cri_grpc.RuntimeServiceStub(channel).Version(cri.VersionRequest(), timeout=1)
        except grpc.RpcError:
            return False
    return True


class RuntimeProxyProcess(ComponentProcess):
    """One `tessera runtime-proxy` process. Not thread-safe: drive it from one thread."""

    def __init__(self, settings: ProxySettings, *, log_path: Path) -> None:
        super().__init__("the runtime proxy", log_path)
        self.settings = settings

    def start(self, timeout: float = 30.0) -> None:
        """Start and wait until it answers CRI. Raises ConfigError (with the end of its log) when
        it exits first or does not answer within `timeout`."""
        s = self.settings
        self._spawn(
            [
                "runtime-proxy",
                "--listen",
                str(s.listen),
                "--runtime-endpoint",
                s.runtime_endpoint,
                "--hook-config-dir",
                str(s.hook_config_dir),
                "--hook-timeout",
                str(s.hook_timeout_s),
            ]
        )
        waiting_for = f"CRI Version to answer on unix://{s.listen}"
        self._wait_ready(lambda: None if answers_cri(s.listen) else waiting_for, timeout)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then wait (SIGKILL after `timeout`); the exit code."""
        return super().stop(timeout)
