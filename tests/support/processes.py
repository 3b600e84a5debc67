"""Child processes: whether one still runs, waiting until one that serves CRI (containerd)
answers, stopping one."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from cli.launchers.runtimeproxy import answers_cri

__all__ = ["is_running", "terminate", "wait_for_cri"]


def wait_for_cri(
    socket: Path, process: subprocess.Popen[bytes], *, what: str, log: Callable[[], str], timeout_s: float = 15.0
) -> None:
    """Return once `process` answers CRI Version on `socket`.

    Raises RuntimeError with `what` and the end of the process's `log()` when it exits first or
    does not answer within `timeout_s`.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}: {log()}")
        if answers_cri(socket):
            return
        time.sleep(0.02)
    raise RuntimeError(f"{what} not ready after {timeout_s}s: {log()}")


def terminate(process: subprocess.Popen[bytes], *, timeout_s: float = 10.0) -> int:
    """SIGTERM, wait, SIGKILL after `timeout_s`; returns the exit code."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout_s)
    return process.returncode


def is_running(pid: int | None) -> bool:
    """True while `pid` exists and is not a zombie (a zombie holds nothing but its pid); False
    for None (a process never started)."""
    if pid is None:
        return False
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat_line.rsplit(")", 1)[-1].split()[0] != "Z"
