"""Child processes that serve CRI (containerd): wait until they answer, stop them."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from cli.launchers.runtimeproxy import answers_cri

__all__ = ["terminate", "wait_for_cri"]


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
