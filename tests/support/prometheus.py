"""Debian's Prometheus and promtool for the tests: found on PATH, or the test cannot run.

Under CI=true a missing binary fails the test (hack/install-system-deps.sh installs Debian's
`prometheus`, which brings promtool); elsewhere it skips with a message saying how to get it.

    with Prometheus.started(tmp_path, config) as prom:   # on a free loopback port, ready
        prom.wait_for_targets(...)                      # /api/v1/targets
        prom.query("up")                                # /api/v1/query, the result vector
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
import yaml

from tests.support.waiting import wait_for

__all__ = ["Prometheus", "binary"]


def binary(name: str) -> str:
    """The path of `prometheus` or `promtool`; fails the test under CI=true when missing, else skips."""
    found = shutil.which(name)
    if found is not None:
        return found
    why = f"no {name} on PATH (as root, `make test` installs Debian's prometheus package, which has it)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Prometheus:
    """One Prometheus server with its own data directory; see the module docstring."""

    def __init__(self, directory: Path, config: dict[str, Any]) -> None:
        self.directory = directory
        self.config_path = directory / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = (directory / "prometheus.log").open("wb")
        self._process = subprocess.Popen(
            [
                binary("prometheus"),
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @classmethod
    def started(cls, directory: Path, config: dict[str, Any]) -> Prometheus:
        prom = cls(directory, config)
        try:
            wait_for(prom._ready, timeout_s=60, what="Prometheus to be ready")
        except BaseException:
            prom.stop()
            raise
        return prom

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()

    def log(self) -> str:
        return (self.directory / "prometheus.log").read_text(errors="replace")

    def _ready(self) -> bool:
        if self._process.poll() is not None:
            raise AssertionError(f"Prometheus exited {self._process.returncode}:\n{self.log()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def targets(self) -> list[dict[str, Any]]:
        active: list[dict[str, Any]] = self.api("targets", state="active")["activeTargets"]
        return active

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result
