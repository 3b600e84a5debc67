"""Reading the node's NodeSLO object: a good version is a config, a bad one a log line and an Event."""

import copy
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent.qos.config import CPUSuppressConfig
from agent.qos.nodeslo import REASON_INVALID, NodeSLOReader
from agent.qos.sources import ABSENT
from apis.extension import names
from kube.events import ObjectReference

NODESLO: dict[str, Any] = {
    "apiVersion": names.NODE_SLOS.api_version,
    "kind": names.NODE_SLOS.kind,
    "metadata": {"name": "node-1", "uid": "u-1", "resourceVersion": "7"},
    "spec": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 40}},
}


@dataclass
class Events:
    """Collects what the reader would record (kube.events.EventRecorder has the same `warning`)."""

    warnings: list[tuple[ObjectReference, str, str]] = field(default_factory=list)

    def warning(self, ref: ObjectReference, reason: str, message: str) -> None:
        self.warnings.append((ref, reason, message))


def bad(**threshold: object) -> dict[str, Any]:
    doc = copy.deepcopy(NODESLO)
    doc["spec"]["resourceUsedThresholdWithBE"].update(threshold)
    return doc


def test_a_good_version_is_its_config() -> None:
    events = Events()
    loaded = NodeSLOReader(node_name="node-1", events=events).read(NODESLO)
    assert loaded.present and loaded.config is not None
    assert loaded.config.cpu_suppress == CPUSuppressConfig(enable=True, threshold_percent=40)
    assert events.warnings == []


def test_no_object_is_absent() -> None:
    assert NodeSLOReader(node_name="node-1", events=Events()).read(None) is ABSENT


def test_a_bad_version_is_logged_and_reported_on_the_object_naming_each_field(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events = Events()
    reader = NodeSLOReader(node_name="node-1", events=events)
    with caplog.at_level(logging.WARNING, logger="agent.qos.nodeslo"):
        loaded = reader.read(bad(cpuSupressMinPercent=5, cpuSuppressThresholdPercent=150))
    assert loaded.malformed
    record = next(r for r in caplog.records if r.getMessage().startswith("Invalid NodeSLO"))
    assert "spec.resourceUsedThresholdWithBE.cpuSupressMinPercent: unknown field" in record.__dict__["error"]
    [(ref, reason, message)] = events.warnings
    assert ref == ObjectReference("NodeSLO", "node-1", "", "u-1", "slo.koordinator.sh/v1alpha1", "7")
    assert reason == REASON_INVALID == "FailedParsing"
    assert message == (
        "the agent of node node-1 cannot read this NodeSLO; the last good QoS config stays in force: "
        "NodeSLO node-1: invalid QoS config: "
        "spec.resourceUsedThresholdWithBE.cpuSupressMinPercent: unknown field; "
        "spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent: must be a percent in 0..100, got 150"
    )


@pytest.mark.parametrize(
    "doc",
    [
        {"kind": "NodeSLO", "metadata": "garbage", "spec": []},
        {"kind": "NodeSLO", "metadata": {"name": "node-1"}, "spec": {"resourceQOSStrategy": {"beClass": 3}}},
    ],
    ids=["no-metadata", "class-not-a-mapping"],
)
def test_garbage_never_raises(doc: dict[str, Any]) -> None:
    events = Events()
    assert NodeSLOReader(node_name="node-1", events=events).read(doc).malformed
    assert [ref.name for ref, _, _ in events.warnings] == ["node-1"]


def test_without_an_event_sink_it_only_logs() -> None:
    assert NodeSLOReader(node_name="node-1", events=None).read(bad(enable="yes")).malformed
