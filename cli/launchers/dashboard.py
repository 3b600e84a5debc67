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

from cli.launchers.base import KubeComponentProcess

__all__ = ["DashboardProcess"]


class DashboardProcess(KubeComponentProcess):
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
        flags = ["--scheduler", scheduler]
        if scheduler_metrics:
            flags += ["--scheduler-metrics", scheduler_metrics]
        if scheduler_address_file is not None:
            flags += ["--scheduler-address-file", str(scheduler_address_file)]
        super().__init__(
            "the dashboard",
            kubeconfig,
            command="dashboard",
            directory=directory,
            log_name="dashboard.log",
            flags=flags,
            args=args,
            verbosity=verbosity,
        )
