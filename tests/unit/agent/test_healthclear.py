"""POST /health/clear, dispatched as the agent's HTTP server does, over a real FaultMemory."""

from __future__ import annotations

import json
from http import HTTPStatus
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from agent.devices.healthclear import PATH, HealthClear
from agent.devices.routing import json_error
from agent.discovery.model import Inventory
from agent.discovery.simulated import load_profile
from agent.health.clock import ManualClock
from agent.health.memory import FaultMemory
from agent.health.statefile import StateFile
from agent.health.tracker import HealthTracker
from kube import serving

NODE = "sim-clear"


class NoEvents:
    def warning(self, reason: str, message: str) -> None:
        pass

    def normal(self, reason: str, message: str) -> None:
        pass


@pytest.fixture
def inventory() -> Inventory:
    return load_profile("t4-2x").inventory(NODE)


@pytest.fixture
def tracker() -> HealthTracker:
    return HealthTracker(ManualClock(), quiet_period_s=300)


@pytest.fixture
def server(tmp_path: Path, inventory: Inventory, tracker: HealthTracker) -> serving.Server:
    memory = FaultMemory(tracker, inventory.gpus, StateFile(tmp_path), events=NoEvents(), node_name=NODE)
    memory.start()
    routes = HealthClear(memory, lambda: inventory.gpus).routes()
    return serving.Server("agent HTTP", host="", port=0, registry=CollectorRegistry(), routes=routes, error=json_error)


def call(server: serving.Server, query: str, method: str = "POST") -> tuple[str, dict[str, object]]:
    response = server.dispatch(method, f"{PATH}?{query}")
    return f"{response.status} {HTTPStatus(response.status).phrase}", json.loads(response.body)


def test_a_gpu_waiting_for_a_reset_is_cleared(
    server: serving.Server, tracker: HealthTracker, inventory: Inventory
) -> None:
    gpu = inventory.gpus[1]
    tracker.fault(gpu.uuid, reason="Xid79", message="off the bus", needs_reset=True)
    assert call(server, "minor=1") == (
        "200 OK",
        {"minor": 1, "uuid": gpu.uuid, "cleared": True, "healthy": True, "reason": "Cleared", "was": "Xid79"},
    )
    assert tracker.health(gpu.uuid).healthy
    assert call(server, "minor=1")[1]["cleared"] is False  # healthy already


def test_a_gpu_that_does_not_answer_stays_unhealthy(
    server: serving.Server, tracker: HealthTracker, inventory: Inventory
) -> None:
    gpu = inventory.gpus[0]
    tracker.problem(gpu.uuid, "nvml-lost", reason="GPULost", message="gone")
    _, body = call(server, "minor=0")
    assert (body["cleared"], body["healthy"], body["reason"]) == (True, False, "GPULost")


@pytest.mark.parametrize(
    ("query", "method", "status", "error"),
    [
        ("", "POST", "400 Bad Request", "missing query parameter minor"),
        ("minor=one", "POST", "400 Bad Request", "minor must be an integer, got 'one'"),
        ("minor=5", "POST", "404 Not Found", "no GPU with minor 5 on this node (minors: 0, 1)"),
        ("minor=0", "GET", "405 Method Not Allowed", "use POST"),
    ],
    ids=["no-minor", "bad-minor", "unknown-gpu", "get"],
)
def test_bad_requests_say_what_is_wrong(
    server: serving.Server, query: str, method: str, status: str, error: str
) -> None:
    answer, body = call(server, query, method)
    assert answer == status and error in str(body["error"])
