"""Which QoS parts the agent runs, from the flags, the machine and the NodeSLO (on a cgroup-v2 fixture tree).

The NodeSLO object reaches NodeQoS as `nodeslo_changed(Loaded)`, which its watch calls
(agent/qos/nodeslo.py; the watch itself runs against a real API server in
tests/integration/qos/test_nodeslo.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from agent.qos import KubeCgroups, config
from agent.qos.node import NodeQoS
from agent.qos.sources import ABSENT, Loaded, Source
from agent.settings import QoSMode, QoSSettings
from apis.k8s.core import Pod
from tests.support.qos import V2Tree

SUPPRESSION = "resourceUsedThresholdWithBE: {enable: true}\n"
CPU_QOS = "resourceQOSStrategy: {beClass: {cpuQOS: {enable: true}}}\n"
NETWORK_QOS = "resourceQOSStrategy: {lsClass: {networkQOS: {enable: true}}}\n"


def no_pods() -> list[Pod]:
    return []


def no_pod(uid: str) -> Pod | None:
    return None


def no_labels() -> dict[str, str]:
    return {}


@pytest.fixture
def kube(tmp_path: Path) -> KubeCgroups:
    return V2Tree(tmp_path / "cgroup").kube()


@pytest.fixture
def made() -> Iterator[list[NodeQoS]]:
    made: list[NodeQoS] = []
    yield made
    for node_qos in made:
        node_qos.stop()


#: What the agent would pass for its pod informer and Node: no pods, no labels.
SEAMS: dict[str, Any] = {"pods": no_pods, "lookup": no_pod, "node_labels": no_labels}


def node_qos(
    made: list[NodeQoS], kube: KubeCgroups, settings: QoSSettings, registry: CollectorRegistry | None = None
) -> NodeQoS:
    result = NodeQoS(settings, cgroups=kube, registry=registry or CollectorRegistry(), **SEAMS)
    made.append(result)
    return result


def nodeslo(text: str) -> Loaded:
    """A NodeSLO object's version, read (its spec as YAML)."""
    return Loaded(present=True, config=config.load(text))


MALFORMED = Loaded(present=True)


def started_on_file(
    made: list[NodeQoS], kube: KubeCgroups, tmp_path: Path, text: str, registry: CollectorRegistry | None = None
) -> tuple[NodeQoS, Path]:
    """NodeQoS started on a NodeSLO file holding `text` (polled only when a test says so)."""
    path = tmp_path / "nodeslo.yaml"
    write(path, text)
    qos = node_qos(made, kube, QoSSettings(config_path=path, config_poll_s=3600), registry)
    qos.start()
    return qos, path


def write(path: Path, text: str) -> None:
    """Write and move the mtime on, so a change is seen even on coarse file-system clocks."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def open_qos(settings: QoSSettings, *, simulated: bool) -> NodeQoS | None:
    return NodeQoS.open(settings, simulated=simulated, registry=CollectorRegistry(), **SEAMS)


@pytest.mark.parametrize(
    ("mode", "simulated", "message"),
    [
        (QoSMode.OFF, False, "Node QoS off (--qos=off)"),
        (QoSMode.AUTO, True, "Node QoS off: devices are simulated"),
    ],
    ids=["off", "auto-simulated"],
)
def test_qos_does_not_run_when_told_not_to(
    mode: QoSMode, simulated: bool, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="agent.qos.node"):
        assert open_qos(QoSSettings(mode=mode), simulated=simulated) is None
    assert any(m.startswith(message) for m in caplog.messages)


def test_qos_never_runs_without_a_kubepods_cgroup(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = QoSSettings(mode=QoSMode.ON, cgroup_root=f"tessera-no-such-root-{os.getpid()}")
    with caplog.at_level(logging.WARNING, logger="agent.qos.node"):
        assert open_qos(settings, simulated=True) is None
    assert "Node QoS off: no kubepods cgroup on this machine" in caplog.messages


def test_koordinators_defaults_enable_nothing(made: list[NodeQoS], kube: KubeCgroups) -> None:
    qos = node_qos(made, kube, QoSSettings())
    qos.start()
    assert qos.plugin is None and qos.running == ()


def test_qos_on_runs_cgroup_qos_even_when_the_nodeslo_enables_no_class(made: list[NodeQoS], kube: KubeCgroups) -> None:
    qos = node_qos(made, kube, QoSSettings(mode=QoSMode.ON))
    qos.start()
    assert qos.plugin is not None and qos.running == ("reconciler",)


def test_the_nodeslo_decides_the_parts_and_a_changed_file_starts_more(
    made: list[NodeQoS], kube: KubeCgroups, tmp_path: Path
) -> None:
    qos, path = started_on_file(made, kube, tmp_path, CPU_QOS)
    assert qos.plugin is not None and qos.running == ("reconciler",)
    write(path, CPU_QOS + SUPPRESSION)
    qos.check_config()
    assert qos.running == ("be-suppression", "reconciler")
    qos.check_config()  # unchanged file: nothing to do
    assert qos.running == ("be-suppression", "reconciler")


def test_a_bad_nodeslo_keeps_the_last_good_one_and_qos_waits_for_a_first_good_one(
    made: list[NodeQoS], kube: KubeCgroups, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "nodeslo.yaml"
    write(path, "resourceUsedThresholdWithBE: {enable: maybe}\n")
    qos = node_qos(made, kube, QoSSettings(config_path=path, config_poll_s=3600))
    qos.start()
    assert qos.running == ()
    write(path, SUPPRESSION)
    qos.check_config()
    assert qos.running == ("be-suppression",)
    with caplog.at_level(logging.ERROR, logger="agent.qos.node"):
        write(path, "resourceUsedThresholdWithBE: [\n")
        qos.check_config()
    assert any(m.startswith("Invalid QoS config") for m in caplog.messages)
    assert qos.running == ("be-suppression",)


def test_network_qos_needs_an_interface(
    made: list[NodeQoS], kube: KubeCgroups, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "nodeslo.yaml"
    write(path, NETWORK_QOS)
    with caplog.at_level(logging.WARNING, logger="agent.qos.node"):
        qos = node_qos(made, kube, QoSSettings(config_path=path, config_poll_s=3600))
        qos.start()
    assert qos.running == ()
    assert any("--network-qos-interface is not set" in m for m in caplog.messages)


def test_the_nodeslo_object_beats_the_file_and_deleting_it_falls_back_to_the_file(
    made: list[NodeQoS], kube: KubeCgroups, tmp_path: Path
) -> None:
    registry = CollectorRegistry()
    qos, path = started_on_file(made, kube, tmp_path, CPU_QOS, registry)
    assert (qos.source, qos.running) == (Source.FILE, ("reconciler",))
    qos.nodeslo_changed(nodeslo(SUPPRESSION))
    assert qos.source is Source.NODESLO and qos.config == config.load(SUPPRESSION)
    assert qos.running == ("be-suppression", "reconciler")  # started live; the reconciler now neutral
    write(path, NETWORK_QOS)
    qos.check_config()
    assert qos.config == config.load(SUPPRESSION)  # the object still wins over the changed file
    qos.nodeslo_changed(ABSENT)
    assert (qos.source, qos.config) == (Source.FILE, config.load(NETWORK_QOS))
    sources = {
        s.value: registry.get_sample_value("tessera_agent_qos_config_source", {"source": s.value}) for s in Source
    }
    assert sources == {"nodeslo": 0, "file": 1, "defaults": 0}


def test_a_malformed_nodeslo_keeps_the_last_good_config_in_force(made: list[NodeQoS], kube: KubeCgroups) -> None:
    registry = CollectorRegistry()
    qos = node_qos(made, kube, QoSSettings(), registry)
    qos.start()
    assert (qos.source, qos.running) == (Source.DEFAULTS, ())
    qos.nodeslo_changed(nodeslo(SUPPRESSION))
    qos.nodeslo_changed(MALFORMED)
    qos.nodeslo_changed(MALFORMED)  # the same version again: counted once
    assert (qos.source, qos.config) == (Source.NODESLO, config.load(SUPPRESSION))
    assert qos.running == ("be-suppression",)
    assert registry.get_sample_value("tessera_agent_qos_config_rejected_total", {"source": "nodeslo"}) == 1
    qos.nodeslo_changed(ABSENT)
    assert (qos.source, qos.config) == (Source.DEFAULTS, config.QoSConfig())


def test_a_malformed_first_nodeslo_keeps_the_file_in_force(
    made: list[NodeQoS], kube: KubeCgroups, tmp_path: Path
) -> None:
    qos, path = started_on_file(made, kube, tmp_path, SUPPRESSION)
    qos.nodeslo_changed(MALFORMED)
    assert (qos.source, qos.config) == (Source.FILE, config.load(SUPPRESSION))
    write(path, CPU_QOS)
    qos.check_config()  # the object exists (unreadable): the file does not take over
    assert qos.config == config.load(SUPPRESSION)


def test_a_bad_file_counts_as_rejected(made: list[NodeQoS], kube: KubeCgroups, tmp_path: Path) -> None:
    path = tmp_path / "nodeslo.yaml"
    write(path, "resourceUsedThresholdWithBE: {enable: maybe}\n")
    registry = CollectorRegistry()
    qos = node_qos(made, kube, QoSSettings(config_path=path, config_poll_s=3600), registry)
    assert qos.source is None and qos.config is None
    assert registry.get_sample_value("tessera_agent_qos_config_rejected_total", {"source": "file"}) == 1


def test_nothing_starts_after_stop(made: list[NodeQoS], kube: KubeCgroups) -> None:
    qos = node_qos(made, kube, QoSSettings())
    qos.start()
    qos.stop()
    qos.nodeslo_changed(nodeslo(SUPPRESSION))
    assert qos.running == ()
