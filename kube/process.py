"""One `tessera <command>` running as a child process: what tests, benchmarks and `tessera up` need.

`ComponentProcess` starts a component with its output going to a log file, waits until it says
it is ready, stops it (SIGTERM, then SIGKILL), kills it (a crash) and reads the end of its log
when something went wrong. `ServingProcess` adds what the components that serve HTTP on a port
they pick themselves have in common: the `HOST:PORT` file they write once serving (so no port
is guessed), readiness on an HTTP path, requests and their Prometheus `/metrics`.

Waiting for readiness always has a deadline, and a start that fails says which process, what
it was still waiting for (its address file, `/readyz` answering 500 and why, ...) and how its
log ends: `tessera up` shows exactly that to a person, so a start never hangs silently.

`cli.launchers.apiserver.EmbeddedAPIServer`, the scheduler's, controller's and agent's `testing`
harnesses build on them, and `tessera up` supervises exactly these objects.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from apis.errors import ConfigError
from kube.restconfig import Credentials

__all__ = ["ComponentProcess", "Samples", "ServingProcess", "free_loopback_port"]

#: /metrics as (name, sorted (label, value) pairs) -> value.
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

_POLL = 0.02
#: How long a process sent SIGKILL gets to be gone.
_REAP_S = 10.0

log = logging.getLogger(__name__)


def free_loopback_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (taken by someone else meanwhile only by chance),
    for a process that cannot pick its own and say which."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ComponentProcess:
    """A child process running `python -m cli <args>` (or another program). Not thread-safe: drive
    it from one thread."""

    def __init__(self, name: str, log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        #: While `start()` waits for readiness: what it is waiting for, in words ("" otherwise).
        #: Other threads may read it, to tell people why a start takes long.
        self.waiting_for = ""

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def returncode(self) -> int | None:
        return self._process.poll() if self._process is not None else None

    def start(self, timeout: float = 60.0) -> object:
        """Start it and return once it is ready; raise ConfigError (with the end of its log) when
        it exits first or is not ready within `timeout`. Each component says how."""
        raise NotImplementedError

    def _spawn(self, args: Sequence[str], *, env: Mapping[str, str] | None = None, program: Sequence[str] = ()) -> None:
        """Start `python -m cli ARGS` (or `PROGRAM ARGS`) in its own session, output appended to the
        log file."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [*(program or (sys.executable, "-m", "cli")), *args]
        environ = {**os.environ, **env} if env is not None else None
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=environ
            )

    def _wait_ready(self, pending: Callable[[], str | None], timeout: float) -> None:
        """Poll `pending` until it returns None. It says, in words, what the process has yet to
        do before it is ready ("its address file …", "GET …/readyz to answer 200 …"), None once
        it is. Raises ConfigError naming the process, what it was still waiting for and the end
        of its log when the process exits first or `timeout` passes; then the process is killed.
        Never waits longer than `timeout` plus one poll of `pending`."""
        deadline = time.monotonic() + timeout
        self.waiting_for = "its first sign of life"
        try:
            while True:
                if not self.running:
                    raise ConfigError(
                        f"{self.name} exited with {self.returncode} before it was ready "
                        f"(it was waiting for {self.waiting_for}){self.log_end()}"
                    )
                still = pending()
                if still is None:
                    return
                self.waiting_for = still
                if time.monotonic() >= deadline:
                    break
                time.sleep(_POLL)
            self.kill()
            raise ConfigError(
                f"{self.name} was not ready within {timeout:g} s: still waiting for {self.waiting_for}{self.log_end()}"
            )
        finally:
            self.waiting_for = ""

    def log_end(self, lines: int = 40) -> str:
        """The end of its log, as the last part of an error message (starts with a newline)."""
        return f"\nThe end of its log ({self.log_path}):\n{self.log_tail(lines) or '(empty)'}"

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait (SIGKILL after `timeout`); the exit code (None when even SIGKILL did
        not end it within `_REAP_S`, logged). Idempotent."""
        if self._process is None:
            return None
        process, self._process = self._process, None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                self._reap(process)
        return process.returncode

    def kill(self) -> None:
        """SIGKILL: no chance to clean up (what a crash looks like)."""
        if self._process is None:
            return
        process, self._process = self._process, None
        if process.poll() is None:
            process.kill()
        self._reap(process)

    def _reap(self, process: subprocess.Popen[bytes]) -> None:
        """Wait for a process sent SIGKILL, but not forever: one stuck in the kernel (a hung
        mount, a device) ignores even that, and stopping the rest must go on."""
        try:
            process.wait(_REAP_S)
        except subprocess.TimeoutExpired:
            log.error(
                "Process did not exit after SIGKILL; leaving it", extra={"component": self.name, "pid": process.pid}
            )

    def signal(self, signum: int) -> None:
        """Send `signum` and return at once. Unlike the other methods, safe to call from another
        thread than the one driving the process (a supervisor asking it to stop)."""
        process = self._process
        if process is not None:
            process.send_signal(signum)  # does nothing once the process has been reaped

    def wait_exit(self, timeout: float | None) -> int | None:
        """Wait for the process to exit by itself (`timeout` None: however long it takes): its exit
        code, or None while it still runs or when none was started. May wait in another thread
        than the one driving the process (a supervisor), so `stop()` may end the wait."""
        process = self._process
        if process is None:
            return None
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class ServingProcess(ComponentProcess):
    """A component serving HTTP on a port it picks itself, which it writes as `HOST:PORT` to
    `address_file` once it serves; ready when `ready_path` answers 200."""

    def __init__(self, name: str, log_path: Path, *, address_file: Path, ready_path: str) -> None:
        super().__init__(name, log_path)
        self.address_file = address_file
        self._ready_path = ready_path
        #: `http://HOST:PORT` of its HTTP server, once it has said where it serves.
        self.url = ""
        #: Who `request` asks as: the Authorization header these give (None: no credentials, so
        #: `system:anonymous` to a component that authenticates through its API server).
        self.credentials: Credentials | None = None

    def _spawn_serving(
        self, args: Sequence[str], *, env: Mapping[str, str] | None = None, program: Sequence[str] = ()
    ) -> None:
        """Spawn with a fresh address file: the one of an earlier run says nothing about this one."""
        self.address_file.parent.mkdir(parents=True, exist_ok=True)
        self.address_file.unlink(missing_ok=True)
        self.url = ""
        self._spawn(args, env=env, program=program)

    def ready(self) -> bool:
        """It has written its address and `ready_path` answers 200."""
        return self.pending() is None

    def pending(self) -> str | None:
        """What it has yet to do before it is ready, in words (for the error when it does not get
        ready); None once it is. The address file is read each time: a writer that is not atomic
        may have been caught half-way."""
        try:
            address = self.address_file.read_text().strip()
        except OSError:
            address = ""
        if not address:
            return f"its address file {self.address_file} (written once it serves HTTP)"
        self.url = f"http://{address}"
        wanted = f"GET {self.url}{self._ready_path} to answer 200"
        try:
            status, body = self.request("GET", self._ready_path, timeout=1)
        except OSError as e:
            return f"{wanted} (no answer: {e})"
        if status == 200:
            return None
        return f"{wanted} (it answered {status}: {_failed_checks(body)})"

    def request(self, method: str, path: str, body: bytes | None = None, *, timeout: float = 10) -> tuple[int, bytes]:
        """One HTTP request: (status, body); an error status is an answer too. Raises OSError
        (URLError is one) when nothing answers or it has not said where it serves yet."""
        if not self.url:
            raise OSError(f"{self.name} has not said where it serves yet")
        request = urllib.request.Request(f"{self.url}{path}", data=body, method=method)
        authorization = self.credentials.authorization() if self.credentials is not None else None
        if authorization:
            request.add_header("Authorization", authorization)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def samples(self) -> Samples:
        """Every sample its `/metrics` shows now. Raises OSError when it does not answer 200."""
        status, body = self.request("GET", "/metrics")
        if status != 200:
            raise OSError(f"{self.name}: GET /metrics answered {status}")
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples
        }

    def metric_sum(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """The sum of `name` over its series that carry `labels`; None when there is none."""
        wanted = set((labels or {}).items())
        values = [v for (n, series), v in self.samples().items() if n == name and wanted <= set(series)]
        return sum(values) if values else None


def _failed_checks(body: bytes, limit: int = 300) -> str:
    """A health endpoint's answer on one line: the checks it names as failed (`[-]…`, as
    kube-apiserver lists them), or its text when it lists none; at most `limit` characters."""
    lines = body.decode(errors="replace").splitlines()
    failed = [line.removeprefix("[-]") for line in lines if line.startswith("[-]")]
    text = "; ".join(failed or lines) or "(no body)"
    return text if len(text) <= limit else text[: limit - 1] + "…"
