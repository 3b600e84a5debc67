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

from cli.launchers.base import KubeComponentProcess

__all__ = ["KubeControllersProcess"]


class KubeControllersProcess(KubeComponentProcess):
    """One workload-controllers process. Not thread-safe: drive it from one thread."""

    def __init__(self, kubeconfig: Path, *, directory: Path, args: Sequence[str] = (), verbosity: int = 2) -> None:
        super().__init__(
            "the kube-controller-manager",
            kubeconfig,
            command="kube-controller-manager",
            directory=directory,
            log_name="kube-controller-manager.log",
            args=args,
            verbosity=verbosity,
        )

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait (SIGKILL after `timeout`); the exit code. Idempotent."""
        return self.stop(timeout)
