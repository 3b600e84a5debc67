"""One `tessera <command>` running as a child process: what tests, benchmarks and `tessera up` need.

`kube.apiserver.testing.EmbeddedAPIServer` and the scheduler's harness build on it: start with
the output going to a log file, wait until the component says it is ready, stop it (SIGTERM,
then SIGKILL), kill it (a crash), read the end of its log when something went wrong.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from apis.errors import ConfigError

__all__ = ["ComponentProcess"]

_POLL = 0.02


class ComponentProcess:
    """A child process running `python -m cli <args>`. Not thread-safe: drive it from one thread."""

    def __init__(self, name: str, log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def returncode(self) -> int | None:
        return self._process.poll() if self._process is not None else None

    def _spawn(self, args: Sequence[str], *, env: Mapping[str, str] | None = None) -> None:
        """Start `python -m cli ARGS` in its own session, output appended to the log file."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "cli", *args]
        environ = {**os.environ, **env} if env is not None else None
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=environ
            )

    def _wait_ready(self, ready: Callable[[], bool], timeout: float) -> None:
        """Poll `ready` until true. Raises ConfigError (with the log's end) when the process exits
        or is not ready within `timeout`; then it is killed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise ConfigError(f"{self.name} exited with {self.returncode}:\n{self.log_tail()}")
            if ready():
                return
            time.sleep(_POLL)
        self.kill()
        raise ConfigError(f"{self.name} was not ready within {timeout}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait (SIGKILL after `timeout`); the exit code. Idempotent."""
        if self._process is None:
            return None
        process, self._process = self._process, None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def kill(self) -> None:
        """SIGKILL: no chance to clean up (what a crash looks like)."""
        if self._process is None:
            return
        process, self._process = self._process, None
        if process.poll() is None:
            process.kill()
        process.wait()

    def wait_exit(self, timeout: float) -> int | None:
        """Wait for the process to exit by itself: its exit code, or None while it still runs."""
        if self._process is None:
            return None
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
