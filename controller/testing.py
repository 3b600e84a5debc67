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

import contextlib
import signal
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


class ControllerProcess:
    """One controller process. Not thread-safe: drive it from one thread."""

    def __init__(self, kubeconfig: Path, *, directory: Path, args: Sequence[str] = (), verbosity: int = 2) -> None:
        """`args` come last, so they may override what this sets; `directory` is created if missing."""
        self.kubeconfig = kubeconfig
        self.directory = directory
        self.log_path = directory / "controller.log"
        self.args = tuple(args)
        self.verbosity = verbosity
        #: `http://HOST:PORT` of its endpoints, once started.
        self.url = ""
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
        self.directory.mkdir(parents=True, exist_ok=True)
        address_file = self.directory / "address"
        address_file.unlink(missing_ok=True)
        self.url = ""
        command = [
            sys.executable,
            "-m",
            "cli",
            "controller",
            "--kubeconfig",
            str(self.kubeconfig),
            "--listen",
            "127.0.0.1:0",
            "--listen-address-file",
            str(address_file),
            f"--v={self.verbosity}",
            *self.args,
        ]
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.url and address_file.exists():
                self.url = f"http://{address_file.read_text().strip()}"
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
        if not self.url:
            raise OSError("the controller has not said where it serves yet")
        try:
            with urllib.request.urlopen(f"{self.url}{path}", timeout=5) as response:
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
