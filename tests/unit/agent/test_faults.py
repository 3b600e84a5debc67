"""Fault injection routes over a simulated profile's FakeNVML, dispatched as the agent's HTTP server does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http import HTTPStatus
from typing import NamedTuple

import pytest
from prometheus_client import CollectorRegistry

from agent.devices.faults import PREFIX, SimulatedFaults
from agent.devices.routing import json_error
from agent.discovery.fake_nvml import FakeNVML
from agent.discovery.nvmllib import NVML, NVMLCallError
from agent.discovery.simulated import load_profile
from kube import serving

NODE = "sim-1"


@pytest.fixture
def fake() -> FakeNVML:
    return load_profile("t4-2x").fake_nvml(NODE)


@pytest.fixture
def nvml(fake: FakeNVML) -> Iterator[NVML]:
    nvml = NVML(fake)
    nvml.init()
    yield nvml
    nvml.shutdown()


def call(fake: FakeNVML, route: str, query: str, method: str = "POST") -> tuple[str, dict[str, object]]:
    routes = SimulatedFaults(fake, node_name=NODE).routes()
    server = serving.Server(
        "agent HTTP", host="", port=0, registry=CollectorRegistry(), routes=routes, error=json_error
    )
    response = server.dispatch(method, f"{PREFIX}{route}?{query}")
    return f"{response.status} {HTTPStatus(response.status).phrase}", json.loads(response.body)


def test_an_xid_reaches_nvml_event_sets(fake: FakeNVML, nvml: NVML) -> None:
    events = nvml.create_event_set()
    handle = nvml.handle_by_index(1)
    nvml.register_xid_events(handle, events, device="gpu1")
    status, body = call(fake, "xid", "minor=1&xid=79")
    assert status == "200 OK"
    assert body == {"minor": 1, "uuid": fake.gpus[1].uuid, "fault": "xid", "xid": 79}
    event = nvml.wait_xid(events, 1000)
    assert event is not None and event.xid == 79
    nvml.free_event_set(events)


def test_a_gpu_can_be_lost_and_reset(fake: FakeNVML) -> None:
    assert call(fake, "gpu-lost", "minor=0")[0] == "200 OK"
    assert fake.gpus[0].lost and not fake.gpus[1].lost
    assert call(fake, "gpu-reset", "minor=0")[0] == "200 OK"
    assert not fake.gpus[0].lost


def test_resetting_a_gpu_that_answers_takes_it_away_for_a_moment(fake: FakeNVML, nvml: NVML) -> None:
    handle = nvml.handle_by_index(1)
    assert call(fake, "gpu-reset", "minor=1")[0] == "200 OK"
    with pytest.raises(NVMLCallError) as caught:  # the health monitor's probe sees it gone ...
        nvml.uuid(handle)
    assert caught.value.gpu_lost and fake.gpus[1].resetting_until > 0  # ... for RESET_DOWNTIME_S


class Bad(NamedTuple):
    route: str
    query: str
    method: str
    status: str
    error: str


@pytest.mark.parametrize(
    "bad",
    [
        Bad("xid", "minor=0", "POST", "400 Bad Request", "missing query parameter xid"),
        Bad("xid", "minor=zero&xid=79", "POST", "400 Bad Request", "minor must be an integer, got 'zero'"),
        Bad("gpu-lost", "minor=-1", "POST", "400 Bad Request", "minor must not be negative"),
        Bad("gpu-lost", "minor=7", "POST", "404 Not Found", "no simulated GPU with minor 7 (minors: 0, 1)"),
        Bad("gpu-reset", "minor=0", "GET", "405 Method Not Allowed", "use POST"),
    ],
    ids=["no-xid", "bad-minor", "negative", "unknown-gpu", "get"],
)
def test_bad_requests_say_what_is_wrong(fake: FakeNVML, bad: Bad) -> None:
    answer, body = call(fake, bad.route, bad.query, bad.method)
    assert answer == bad.status and bad.error in str(body["error"])
    assert not any(g.lost for g in fake.gpus)
