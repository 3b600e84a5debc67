"""Run `tessera controller` as a separate process, for tests, benchmarks and `tessera up`.

    process = ControllerProcess(kubeconfig, directory=Path("run/controller"), args=("--leader-elect",))
    process.start()                         # returns once /readyz answers 200
    process.metric("tessera_controller_node_writes_total")
    process.terminate()                     # SIGTERM: a clean stop (0)
    process.kill()                          # SIGKILL: a crash

The process serves its endpoints on a loopback port it picks itself (port 0) and writes that
address to `directory/address`, so no port is guessed; its log is `directory/controller.log`. It
runs `python -m cli controller` with this interpreter, so it is the code of this
checkout or installation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cli.launchers.base import KubeComponentProcess
from kube.process import Samples

__all__ = ["ControllerProcess", "Samples"]


class ControllerProcess(KubeComponentProcess):
    """One controller process. Not thread-safe: drive it from one thread."""

    def __init__(self, kubeconfig: Path, *, directory: Path, args: Sequence[str] = (), verbosity: int = 2) -> None:
        """`args` come last, so they may override what this sets; `directory` is created if missing."""
        super().__init__(
            "the controller",
            kubeconfig,
            command="controller",
            directory=directory,
            log_name="controller.log",
            args=args,
            verbosity=verbosity,
        )

    def get(self, path: str) -> tuple[int, str]:
        """GET one of its endpoints: (status, body). Raises OSError when it does not answer."""
        status, body = self.request("GET", path, timeout=5)
        return status, body.decode()

    def metrics(self) -> Samples:
        """Every sample /metrics shows now."""
        return self.samples()

    def metric(self, name: str, **labels: str) -> float:
        """The sum of `name` over its series that carry `labels` (0 when there is none)."""
        return self.metric_sum(name, labels) or 0.0

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait (SIGKILL after `timeout`); the exit code. Idempotent."""
        return self.stop(timeout)
