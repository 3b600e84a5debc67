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

from cli.launchers.base import KubeComponentProcess

__all__ = ["DeschedulerProcess"]


class DeschedulerProcess(KubeComponentProcess):
    """One descheduler process. Not thread-safe: drive it from one thread."""

    def __init__(self, kubeconfig: Path, *, directory: Path, args: Sequence[str] = (), verbosity: int = 2) -> None:
        super().__init__(
            "the descheduler",
            kubeconfig,
            command="descheduler",
            directory=directory,
            log_name="descheduler.log",
            args=args,
            verbosity=verbosity,
        )

    def metric(self, name: str, **labels: str) -> float:
        """The sum of `name` over its series that carry `labels` (0 when there is none)."""
        return self.metric_sum(name, labels) or 0.0
