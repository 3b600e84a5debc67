"""Run `tessera kube-controller-manager` as a separate process, for tests and `tessera up`.

    process = KubeControllersProcess(kubeconfig, directory=Path("run/kube-controller-manager"))
    process.start()                         # returns once /readyz answers 200 (caches synced)
    process.kill()                          # SIGKILL: a crash

It serves on a loopback port it picks itself and writes the address to `directory/address`; its
log is `directory/kube-controller-manager.log`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kube.process import ServingProcess

__all__ = ["KubeControllersProcess"]


class KubeControllersProcess(ServingProcess):
    """One workload-controllers process. Not thread-safe: drive it from one thread."""

    def __init__(self, kubeconfig: Path, *, directory: Path, args: Sequence[str] = (), verbosity: int = 2) -> None:
        super().__init__(
            "the kube-controller-manager",
            directory / "kube-controller-manager.log",
            address_file=directory / "address",
            ready_path="/readyz",
        )
        self.kubeconfig = kubeconfig
        self.directory = directory
        self.args = tuple(args)
        self.verbosity = verbosity

    def start(self, timeout: float = 60.0) -> KubeControllersProcess:
        """Start it and wait until ready. Raises ConfigError if it exits or is not ready within `timeout`."""
        self._spawn_serving(
            [
                "kube-controller-manager",
                "--kubeconfig",
                str(self.kubeconfig),
                "--listen",
                "127.0.0.1:0",
                "--listen-address-file",
                str(self.address_file),
                f"--v={self.verbosity}",
                *self.args,
            ]
        )
        self._wait_ready(self.pending, timeout)
        return self

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait (SIGKILL after `timeout`); the exit code. Idempotent."""
        return self.stop(timeout)
