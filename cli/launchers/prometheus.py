"""Debian's Prometheus as a child process, for `tessera up --prometheus`.

    process = PrometheusProcess(directory, config=directory / "prometheus.yml")
    process.start()            # returns once /-/ready answers 200
    process.url                # http://127.0.0.1:PORT, its web UI and API
    process.stop()

Prometheus cannot pick a port and say which, so this picks a free loopback port at the first
start and keeps it (a restarted Prometheus is where it was), writing it to `directory/address` as
the other launchers' components do. Its data (`directory/data`) and log (`prometheus.log`) stay
in the directory; the configuration is the caller's. `binary()` finds the program or says how to
get it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Self

from apis.errors import ConfigError
from kube.lifecycle import write_atomically
from kube.process import ServingProcess, free_loopback_port

__all__ = ["PrometheusProcess", "binary"]


def binary() -> str:
    """The `prometheus` program on PATH; ConfigError saying how to install it when there is none."""
    found = shutil.which("prometheus")
    if found is None:
        raise ConfigError(
            "--prometheus: no prometheus program on PATH; install Debian's (apt-get install prometheus) "
            "or put upstream's on PATH"
        )
    return found


class PrometheusProcess(ServingProcess):
    """One Prometheus server. Not thread-safe: drive it from one thread."""

    def __init__(self, directory: Path, *, config: Path, program: str = "") -> None:
        super().__init__(
            "Prometheus", directory / "prometheus.log", address_file=directory / "address", ready_path="/-/ready"
        )
        self.directory = directory
        self.config = config
        self.program = program or binary()
        self.port = 0

    def start(self, timeout: float = 60.0) -> Self:
        """Start it and wait until it is ready. Raises ConfigError, with the end of its log, when
        it exits first (a bad configuration, the port taken) or is not ready within `timeout`."""
        self.port = self.port or free_loopback_port()
        args = [
            f"--config.file={self.config}",
            f"--storage.tsdb.path={self.directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        self._spawn_serving(args, program=[self.program])
        write_atomically(self.address_file, f"127.0.0.1:{self.port}\n")
        self._wait_ready(self.pending, timeout)
        return self
