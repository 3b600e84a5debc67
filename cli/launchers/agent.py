"""Run `tessera agent` as a child process: for tests, benchmarks and `tessera up`.

    with AgentProcess(kubeconfig, node_name="sim-1", args=["--simulate-devices", "a100-8x"]) as agent:
        agent.get("/healthz")
        agent.metric("tessera_agent_device_cr_syncs_total", result="unchanged")
        agent.inject("xid", minor=3, xid=79)       # POST /debug/simulate/xid (simulated devices only)
        agent.clear_health(minor=3)                # POST /health/clear: the operator's override

Each agent gets its own directory (a short one under /tmp unless given: socket paths must stay
under 108 bytes) holding its log, its hook server's socket, its state directory (`state/`, where
GPU faults waiting for a reset outlive a restart) and the file where it writes the address it
serves HTTP on (a free loopback port, so no port is guessed). `start()` returns once
/healthz answers and can be called again after the process exited (a restart); `stop()` sends
SIGTERM and returns the exit code; `cleanup()` also removes a directory it made.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from cli.launchers.base import KubeComponentProcess

__all__ = ["AgentProcess"]


class AgentProcess(KubeComponentProcess):
    """One `tessera agent` process. Not thread-safe: drive it from one thread."""

    def __init__(
        self,
        kubeconfig: Path,
        *,
        node_name: str,
        args: Sequence[str] = (),
        directory: Path | None = None,
    ) -> None:
        """`args` are further flags (`--simulate-devices`, ...); they come last, so they may
        override the HTTP address and hook socket this sets."""
        self._own_directory = directory is None
        directory = directory or Path(tempfile.mkdtemp(prefix="tessera-agent-", dir="/tmp"))
        self.node_name = node_name
        self.hook_socket = directory / "agent.sock"
        self.state_dir = directory / "state"
        super().__init__(
            f"the agent of {node_name}",
            kubeconfig,
            command="agent",
            directory=directory,
            log_name="agent.log",
            address_flags=("--metrics-address", "--metrics-address-file"),
            ready_path="/healthz",
            flags=[
                *("--node-name", node_name),
                *("--hook-socket", str(self.hook_socket)),
                *("--state-dir", str(self.state_dir)),
            ],
            args=args,
        )

    # --- HTTP --------------------------------------------------------------------------------------
    def get(self, path: str) -> tuple[int, str]:
        """GET: (status, body); status 0 and the reason when the agent does not answer."""
        try:
            status, body = self.request("GET", path)
        except OSError as e:
            return 0, str(e)
        return status, body.decode()

    def inject(self, fault: str, **params: int) -> dict[str, object]:
        """POST /debug/simulate/<fault>?params; raises AssertionError unless the agent says 200."""
        return self._post(f"/debug/simulate/{fault}", params)

    def clear_health(self, *, minor: int) -> dict[str, object]:
        """POST /health/clear?minor=N (the operator's override); AssertionError unless 200."""
        return self._post("/health/clear", {"minor": minor})

    def _post(self, path: str, params: dict[str, int]) -> dict[str, object]:
        status, body = self.request("POST", f"{path}?{urllib.parse.urlencode(params)}")
        if status != 200:
            raise AssertionError(f"POST {path} {params}: {status} {body.decode()}")
        answer: dict[str, object] = json.loads(body)
        return answer

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of one sample from /metrics, or None when it is not there (or no answer)."""
        try:
            return self.metric_sum(name, labels)
        except OSError:
            return None

    # --- process -----------------------------------------------------------------------------------
    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, wait (SIGKILL after `timeout`); the exit code. Idempotent."""
        return super().stop(timeout)

    def cleanup(self) -> None:
        """Stop, and remove the directory it made (kept with TESSERA_KEEP_AGENT_DIR=1)."""
        self.stop()
        if self._own_directory and not os.environ.get("TESSERA_KEEP_AGENT_DIR"):
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()
