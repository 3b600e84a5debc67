"""The reconciler over a cgroup-v2 fixture tree (systemd layout) fed by a list of pods."""

import logging
import threading

import pytest
from prometheus_client import CollectorRegistry

from agent.qos import config
from agent.qos.config import QoSConfig
from agent.qos.layout import KubeCgroups
from agent.qos.reconciler import Reconciler
from apis.extension.qos import KubeQoSClass, kube_qos_class
from apis.k8s.core import Pod
from tests.support.qos import V2Tree, batch_ctr, ctr, make_pod


def setup(
    v2: V2Tree, pods: list[Pod], cfg: QoSConfig | None = None
) -> tuple[KubeCgroups, Reconciler, CollectorRegistry]:
    kube = v2.kube()
    registry = CollectorRegistry()
    return kube, Reconciler(cgroups=kube, pods=lambda: pods, config=cfg or QoSConfig(), registry=registry), registry


def test_brings_pods_in_line_and_then_does_nothing(v2: V2Tree) -> None:
    ls = make_pod(ctr("a", {"cpu": "500m", "memory": "1Gi"}, {"cpu": "1", "memory": "2Gi"}))
    be = make_pod(batch_ctr("b", cpu_request="1000", cpu_limit="2000"), qos="BE")
    pods = [ls, be]
    kube, reconciler, registry = setup(v2, pods)
    ls_rel, be_rel = v2.add_pod(kube, ls), v2.add_pod(kube, be)

    report = reconciler.reconcile_once()
    assert (report.pods, report.applied, report.missing, report.errors) == (2, 2, 0, {})
    assert v2.read(ls_rel, "cpu.max") == "100000 100000"
    assert v2.read(ls_rel, "memory.max") == str(2 * 2**30)
    ls_container = next(p for p in (v2.root / ls_rel).iterdir() if p.name.endswith(".scope"))
    assert (ls_container / "cpu.weight").read_text() == "20"  # 512 shares
    assert v2.read(be_rel, "cpu.max") == "200000 100000"
    assert v2.read(be_rel, "cpu.weight") == "39"

    again = reconciler.reconcile_once()
    assert again.changes == [] and again.applied == 2
    assert registry.get_sample_value("tessera_agent_qos_cgroup_writes_total") == len(report.changes)
    assert registry.get_sample_value("tessera_agent_qos_reconcile_duration_seconds_count") == 2


def test_pods_without_cgroups_and_terminal_pods(v2: V2Tree) -> None:
    pending = make_pod(ctr("a", {"cpu": "1"}))
    done = make_pod(ctr("a", {"cpu": "1"}), phase="Succeeded")
    _, reconciler, _ = setup(v2, [pending, done])
    report = reconciler.reconcile_once()
    assert (report.pods, report.applied, report.missing) == (1, 0, 1)


def test_one_bad_pod_does_not_stop_the_others(v2: V2Tree, caplog: pytest.LogCaptureFixture) -> None:
    bad = make_pod(ctr("a", {"cpu": "1"}), container_ids={"a": "containerd://../../etc"})
    good = make_pod(ctr("a", {"cpu": "250m"}, {"cpu": "250m"}))
    kube, reconciler, registry = setup(v2, [bad, good])
    v2.make(kube.pod_dir(bad.uid, kube_qos_class(bad)).rel)
    good_rel = v2.add_pod(kube, good)
    report = reconciler.reconcile_once()
    assert list(report.errors) == [bad.key]
    assert "malformed container id 'containerd://../../etc'" in report.errors[bad.key]
    assert report.applied == 1 and v2.read(good_rel, "cpu.max") == "25000 100000"
    assert registry.get_sample_value("tessera_agent_qos_reconcile_errors_total") == 1

    reconciler.reconcile_once()  # the same problem again: counted, but warned about only once
    warnings = [
        r for r in caplog.records if r.levelno == logging.WARNING and r.getMessage() == "Cannot apply QoS to pod"
    ]
    assert len(warnings) == 1
    assert registry.get_sample_value("tessera_agent_qos_reconcile_errors_total") == 2


def test_kernel_refusal_is_reported_per_pod(v2: V2Tree) -> None:
    pod = make_pod(ctr("a", {"cpu": "1"}))
    kube, reconciler, _ = setup(v2, [pod])
    rel = v2.add_pod(kube, pod)
    (v2.root / rel / "cpu.max").write_text("garbage\n")
    report = reconciler.reconcile_once()
    assert "cpu.max: value 'garbage\\n': unexpected content" in report.errors[pod.key]


def test_be_root_idle_follows_config_and_config_can_change(v2: V2Tree) -> None:
    kube, reconciler, _ = setup(v2, [])
    be_root = kube.qos_dir(KubeQoSClass.BEST_EFFORT).rel
    reconciler.reconcile_once()
    assert v2.read(be_root, "cpu.idle") == "0"
    reconciler.set_config(config.load("resourceQOSStrategy: {beClass: {cpuQOS: {enable: true}}}"))
    reconciler.reconcile_once()
    assert v2.read(be_root, "cpu.idle") == "1"


def test_start_runs_passes_in_a_thread_until_stop(v2: V2Tree) -> None:
    third = threading.Event()
    calls = []

    def pods() -> list[Pod]:
        calls.append(1)
        if len(calls) >= 3:
            third.set()
        return []

    reconciler = Reconciler(cgroups=v2.kube(), pods=pods, config=QoSConfig(), interval_s=0.0)
    reconciler.start()
    try:
        assert third.wait(10)
    finally:
        reconciler.stop()
