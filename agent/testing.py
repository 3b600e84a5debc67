"""Run `tessera agent` as a child process: for tests, benchmarks and `tessera up`.

    with AgentProcess.start(kubeconfig, node_name="sim-1", args=["--simulate-devices", "a100-8x"]) as agent:
        agent.get("/healthz")
        agent.metric("tessera_agent_device_cr_syncs_total", result="unchanged")
        agent.inject("xid", minor=3, xid=79)       # POST /debug/simulate/xid (simulated devices only)

Each agent gets its own directory (a short one under /tmp unless given: socket paths must stay
under 108 bytes) holding its log, its hook server's socket and the file where it writes the
address it serves HTTP on (a free loopback port, so no port is guessed). `start` returns once
/healthz answers; `stop()` sends SIGTERM and returns the exit code; `cleanup()` also removes a
directory `start` made.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["AgentProcess"]


class AgentProcess:
    """One `tessera agent` process. Not thread-safe: drive it from one thread."""

    def __init__(self, process: subprocess.Popen[bytes], directory: Path, node_name: str, *, own: bool) -> None:
        self.process = process
        self.directory = directory
        self.node_name = node_name
        self._own_directory = own
        self.log_path = directory / "agent.log"
        self.hook_socket = directory / "agent.sock"
        self.url = ""

    @classmethod
    def start(
        cls,
        kubeconfig: Path,
        *,
        node_name: str,
        args: Sequence[str] = (),
        directory: Path | None = None,
        timeout_s: float = 60.0,
    ) -> AgentProcess:
        """Start the agent and wait until it serves /healthz.

        `args` are further flags (`--simulate-devices`, ...); they come last, so they may override
        the HTTP address and hook socket this sets. Raises RuntimeError, with the end of the
        agent's log, when it exits first or is not ready within `timeout_s`.
        """
        own = directory is None
        if directory is None:
            directory = Path(tempfile.mkdtemp(prefix="tessera-agent-", dir="/tmp"))
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "address").unlink(missing_ok=True)
        command = [
            sys.executable,
            "-m",
            "cli",
            "agent",
            "--node-name",
            node_name,
            "--kubeconfig",
            str(kubeconfig),
            "--metrics-address",
            "127.0.0.1:0",
            "--metrics-address-file",
            str(directory / "address"),
            "--hook-socket",
            str(directory / "agent.sock"),
            *args,
        ]
        with (directory / "agent.log").open("ab") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        agent = cls(process, directory, node_name, own=own)
        try:
            agent._wait_ready(directory / "address", timeout_s)
        except BaseException:
            agent.cleanup()
            raise
        return agent

    def _wait_ready(self, address_file: Path, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the agent exited with {self.process.returncode}:\n{self.log_tail()}")
            if address_file.exists():
                self.url = f"http://{address_file.read_text().strip()}"
                if self.get("/healthz")[0] == 200:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"the agent was not ready within {timeout_s}s:\n{self.log_tail()}")

    # --- HTTP --------------------------------------------------------------------------------------
    def get(self, path: str) -> tuple[int, str]:
        return self._request("GET", path)

    def _request(self, method: str, path: str) -> tuple[int, str]:
        request = urllib.request.Request(f"{self.url}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except urllib.error.URLError as e:
            return 0, str(e.reason)

    def inject(self, fault: str, **params: int) -> dict[str, object]:
        """POST /debug/simulate/<fault>?params; raises AssertionError unless the agent says 200."""
        status, body = self._request("POST", f"/debug/simulate/{fault}?{urllib.parse.urlencode(params)}")
        if status != 200:
            raise AssertionError(f"fault injection {fault} {params}: {status} {body}")
        answer: dict[str, object] = json.loads(body)
        return answer

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of one sample from /metrics, or None when it is not there."""
        status, text = self.get("/metrics")
        if status != 200:
            return None
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return float(sample.value)
        return None

    # --- process -----------------------------------------------------------------------------------
    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, wait (SIGKILL after `timeout_s`); the exit code. Idempotent."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def cleanup(self) -> None:
        """Stop, and remove the directory `start` made (kept with TESSERA_KEEP_AGENT_DIR=1)."""
        self.stop()
        if self._own_directory and not os.environ.get("TESSERA_KEEP_AGENT_DIR"):
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()
