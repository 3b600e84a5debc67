"""Run `tessera descheduler` as a separate process, for tests and `tessera up`.

    process = DeschedulerProcess(kubeconfig, directory=Path("run/descheduler"), args=("--dry-run",))
    process.start()                         # returns once /readyz answers 200 (caches synced)
    process.metric("tessera_descheduler_evictions_total", result="ok")
    process.kill()                          # SIGKILL: a crash

It serves on a loopback port it picks itself and writes the address to `directory/address`; its
log is `directory/descheduler.log`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kube.process import ServingProcess

__all__ = ["DeschedulerProcess"]


class DeschedulerProcess(ServingProcess):
    """One descheduler process. Not thread-safe: drive it from one thread."""

    def __init__(self, kubeconfig: Path, *, directory: Path, args: Sequence[str] = (), verbosity: int = 2) -> None:
        super().__init__(
            "the descheduler", directory / "descheduler.log", address_file=directory / "address", ready_path="/readyz"
        )
        self.kubeconfig = kubeconfig
        self.directory = directory
        self.args = tuple(args)
        self.verbosity = verbosity

    def start(self, timeout: float = 60.0) -> DeschedulerProcess:
        """Start it and wait until it is ready. Raises ConfigError if it exits or is not ready in time."""
        self._spawn_serving(
            [
                "descheduler",
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

    def metric(self, name: str, **labels: str) -> float:
        """The sum of `name` over its series that carry `labels` (0 when there is none)."""
        return self.metric_sum(name, labels) or 0.0
