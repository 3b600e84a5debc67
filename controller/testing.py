"""Run `tessera controller` as a separate process, for tests, benchmarks and `tessera up`.

    process = ControllerProcess(kubeconfig, log_path=Path("controller.log"), args=("--leader-elect",))
    process.start()                         # returns once /readyz answers 200
    process.metric("tessera_controller_node_writes_total")
    process.terminate()                     # SIGTERM: a clean stop (0)
    process.kill()                          # SIGKILL: a crash

The process serves its endpoints on a free loopback port (`process.port`) and writes its log to
`log_path`. It runs `python -m cli controller` with this interpreter, so it is the code of this
checkout or installation.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from apis.errors import ConfigError

__all__ = ["ControllerProcess", "Samples"]

#: /metrics as (name, sorted (label, value) pairs) -> value.
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ControllerProcess:
    """One controller process. Not thread-safe: drive it from one thread."""

    def __init__(self, kubeconfig: Path, *, log_path: Path, args: Sequence[str] = (), verbosity: int = 2) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.args = tuple(args)
        self.verbosity = verbosity
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = 60.0) -> ControllerProcess:
        """Start it and wait until it is ready (caches synced). Raises ConfigError if it exits or
        is not ready within `timeout` (with the end of its log)."""
        if self.running:
            raise RuntimeError("the controller is already running")
        self.port = _free_port()
        command = [
            sys.executable,
            "-m",
            "cli",
            "controller",
            "--kubeconfig",
            str(self.kubeconfig),
            "--listen",
            f"127.0.0.1:{self.port}",
            f"--v={self.verbosity}",
            *self.args,
        ]
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.running:
                raise ConfigError(f"the controller exited with {self._exit_code()}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise ConfigError(f"the controller was not ready within {timeout}s:\n{self.log_tail()}")
            time.sleep(0.02)
        return self

    def _exit_code(self) -> int | None:
        return self._process.poll() if self._process is not None else None

    def get(self, path: str) -> tuple[int, str]:
        """GET one of its endpoints: (status, body). Raises OSError when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def ready(self) -> bool:
        try:
            return self.get("/readyz")[0] == 200
        except OSError:
            return False

    def metrics(self) -> Samples:
        """Every sample /metrics shows now."""
        _, text = self.get("/metrics")
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def metric(self, name: str, **labels: str) -> float:
        """The sum of `name` over its series that carry `labels` (0 when there is none)."""
        wanted = set(labels.items())
        return sum(v for (n, series), v in self.metrics().items() if n == name and wanted <= set(series))

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait (SIGKILL after `timeout`); the exit code. Idempotent."""
        if self._process is None:
            return None
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        return self._process.returncode

    def kill(self) -> None:
        """SIGKILL: no clean-up at all (what a crash or an OOM kill looks like)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def log_tail(self, lines: int = 60) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"
