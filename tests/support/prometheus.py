"""Debian's Prometheus and promtool for the tests: found on PATH, or the test cannot run.

Under CI=true a missing binary fails the test (hack/install-system-deps.sh installs Debian's
`prometheus`, which brings promtool); elsewhere it skips with a message saying how to get it.
The Prometheus the e2e tests ask is the one `tessera up --prometheus` runs:

    prom = PrometheusAPI(up.state().components["prometheus"].url)
    prom.targets()                                  # /api/v1/targets, the active ones
    prom.query("up")                                # /api/v1/query, the result vector
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.parse
import urllib.request
from typing import Any

import pytest

__all__ = ["PrometheusAPI", "binary"]


def binary(name: str) -> str:
    """The path of `prometheus` or `promtool`; fails the test under CI=true when missing, else skips."""
    found = shutil.which(name)
    if found is not None:
        return found
    why = f"no {name} on PATH (as root, `make test` installs Debian's prometheus package, which has it)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


class PrometheusAPI:
    """A running Prometheus' HTTP API at `url` (`http://127.0.0.1:PORT`)."""

    def __init__(self, url: str) -> None:
        self.url = url

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
