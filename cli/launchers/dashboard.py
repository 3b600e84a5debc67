"""Run `tessera dashboard` as a separate process, for tests, the benchmark and `tessera up`.

    process = DashboardProcess(kubeconfig, directory=Path("run/dashboard"), scheduler="unix:///…")
    process.start()            # returns once /readyz answers 200 (devices and pods listed)
    process.url                # http://127.0.0.1:PORT, the page
    process.stop()

It serves on a loopback port it picks itself and writes the address to `directory/address`;
its log is `directory/dashboard.log`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kube.process import ServingProcess

__all__ = ["DashboardProcess"]


class DashboardProcess(ServingProcess):
    """One dashboard process. Not thread-safe: drive it from one thread."""

    def __init__(
        self,
        kubeconfig: Path,
        *,
        directory: Path,
        scheduler: str = "none",
        scheduler_metrics: str = "",
        scheduler_address_file: Path | None = None,
        args: Sequence[str] = (),
        verbosity: int = 2,
    ) -> None:
        """`scheduler`: its gRPC address ('none': no explanations); `scheduler_metrics`: its
        /metrics URL, or `scheduler_address_file`: where it writes its HTTP address (neither: no
        health). `args` come last, so they may override these."""
        super().__init__(
            "the dashboard", directory / "dashboard.log", address_file=directory / "address", ready_path="/readyz"
        )
        self.kubeconfig = kubeconfig
        self.directory = directory
        self.args = [
            "dashboard",
            "--kubeconfig",
            str(kubeconfig),
            "--listen",
            "127.0.0.1:0",
            "--listen-address-file",
            str(self.address_file),
            "--scheduler",
            scheduler,
            f"--v={verbosity}",
        ]
        if scheduler_metrics:
            self.args += ["--scheduler-metrics", scheduler_metrics]
        if scheduler_address_file is not None:
            self.args += ["--scheduler-address-file", str(scheduler_address_file)]
        self.args += list(args)

    def start(self, timeout: float = 60.0) -> DashboardProcess:
        """Start it and wait until it is ready; raises ConfigError (with its log's end) otherwise."""
        self._spawn_serving(self.args)
        self._wait_ready(self.pending, timeout)
        return self

    def __enter__(self) -> DashboardProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
