"""The agent's /metrics over real HTTP on loopback, from simulated GPUs."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from agent.discovery.nvmllib import NVML
from agent.discovery.simulated import load_profile
from agent.health.clock import SystemClock
from agent.health.tracker import HealthTracker
from agent.metrics.containers import ContainerResolver
from agent.metrics.gpu import GPUMetrics
from kube import serving

pytestmark = pytest.mark.integration


@pytest.fixture
def exporter() -> Iterator[serving.Server]:
    profile = load_profile("a100-8x")
    nvml = NVML(profile.fake_nvml("n1"))
    nvml.init()
    registry = CollectorRegistry()
    metrics = GPUMetrics(
        registry,
        node_name="n1",
        nvml=nvml,
        gpus=profile.inventory("n1").gpus,
        tracker=HealthTracker(SystemClock()),
        containers=ContainerResolver(),
    )
    metrics.refresh()
    exporter = serving.Server("agent HTTP", host="127.0.0.1", port=0, registry=registry)
    exporter.start()
    yield exporter
    exporter.stop()


def get(exporter: serving.Server, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_metrics_are_served_on_slash_metrics(exporter: serving.Server) -> None:
    status, text = get(exporter, "/metrics")
    assert status == 200
    assert text.count("tessera_gpu_memory_total_bytes{") == 8
    assert 'tessera_gpu_healthy{minor="0",model="A100-SXM4-80GB",node="n1"' in text
    assert "tessera_agent_collection_duration_seconds_bucket" in text


def test_other_paths_are_not_found(exporter: serving.Server) -> None:
    status, text = get(exporter, "/")
    assert status == 404 and "/metrics" in text


def test_extra_routes_are_served_beside_metrics() -> None:
    def hello(request: serving.Request) -> serving.Response:
        return serving.Response.text("ok")

    routes = [serving.Route("GET", "/hello", hello)]
    exporter = serving.Server("agent HTTP", host="127.0.0.1", port=0, registry=CollectorRegistry(), routes=routes)
    exporter.start()
    try:
        assert get(exporter, "/hello") == (200, "ok\n")
        assert get(exporter, "/metrics")[0] == 200
        status, text = get(exporter, "/nope")
        assert status == 404 and "/hello, /livez, /metrics" in text
    finally:
        exporter.stop()


def test_stop_closes_the_port(exporter: serving.Server) -> None:
    port = exporter.port
    exporter.stop()
    exporter.stop()  # idempotent
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
