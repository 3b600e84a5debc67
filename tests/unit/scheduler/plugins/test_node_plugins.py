"""The node plugins a secondary scheduler must respect: fit, affinity, taints, cordon, nodeName."""

from __future__ import annotations

import dataclasses

import pytest

from apis.extension import names
from apis.k8s import labels
from apis.k8s.core import NodeAffinity, NodeSelectorTerm, Taint, Toleration
from scheduler.cache import PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from tests.support.builders import make_node, make_pod
from tests.support.scheduling import make_scheduler

NO_SCHEDULE = names.TAINT_EFFECT_NO_SCHEDULE


def test_cpu_memory_and_pods_must_fit() -> None:
    scheduler = make_scheduler(make_node("n1", milli_cpu=4000, max_pods=2))
    assert scheduler.schedule_one(make_pod("a", cpu=3000)).node == "n1"
    too_big = scheduler.schedule_one(make_pod("b", cpu=2000))
    assert too_big.status.code is Code.UNSCHEDULABLE
    assert too_big.diagnosis.reasons_by_node() == {"n1": ["Insufficient cpu"]}
    assert [str(s) for s in too_big.diagnosis.nearest()[0][1]] == ["node has 1 cpu free, needs 2"]
    assert scheduler.schedule_one(make_pod("c", cpu=100)).node == "n1"
    full = scheduler.schedule_one(make_pod("d"))
    assert full.diagnosis.reasons_by_node() == {"n1": ["Too many pods"]}


def test_request_beyond_the_whole_node_is_unresolvable() -> None:
    scheduler = make_scheduler(make_node("n1", milli_cpu=4000))
    outcome = scheduler.schedule_one(make_pod("huge", cpu=8000))
    assert outcome.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_batch_resources_are_checked_like_any_extended_resource() -> None:
    node, device = make_node("n1")
    node = dataclasses.replace(node, allocatable={**node.allocatable, names.BATCH_CPU: 2000})
    scheduler = make_scheduler((node, device))
    assert scheduler.schedule_one(make_pod("be", extra={names.BATCH_CPU: 1500})).node == "n1"
    outcome = scheduler.schedule_one(make_pod("be2", extra={names.BATCH_CPU: 1000}))
    assert outcome.diagnosis.reasons_by_node() == {"n1": ["Insufficient kubernetes.io/batch-cpu"]}


def test_node_selector_and_required_affinity() -> None:
    a100 = make_node("a", gpu_model="A100")
    t4 = make_node("t", gpu_model="T4")
    scheduler = make_scheduler(a100, t4)
    pod = make_pod("sel", node_selector={names.LABEL_GPU_MODEL: "T4"})
    assert scheduler.schedule_one(pod).node == "t"
    term = NodeSelectorTerm((labels.Requirement(names.LABEL_GPU_MODEL, labels.Operator.IN, ("A100", "H100")),))
    pod = make_pod("aff", affinity=NodeAffinity(required=(term,)))
    assert scheduler.schedule_one(pod).node == "a"
    nowhere = make_pod("none", node_selector={names.LABEL_GPU_MODEL: "V100"})
    outcome = scheduler.schedule_one(nowhere)
    assert outcome.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert outcome.status.message == "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."


def test_preferred_affinity_scores() -> None:
    scheduler = make_scheduler(make_node("a", gpu_model="A100"), make_node("t", gpu_model="T4"))
    term = NodeSelectorTerm((labels.Requirement(names.LABEL_GPU_MODEL, labels.Operator.IN, ("T4",)),))
    pod = make_pod("pref", affinity=NodeAffinity(preferred=((50, term),)))
    assert scheduler.schedule_one(pod).node == "t"


def test_untolerated_taints_reject_and_tolerations_admit() -> None:
    tainted = make_node("tainted", taints=[Taint("dedicated", "infra", NO_SCHEDULE)])
    scheduler = make_scheduler(tainted)
    outcome = scheduler.schedule_one(make_pod("p"))
    assert outcome.status.message == "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}."
    tolerant = make_pod("q", tolerations=[Toleration("dedicated", "Equal", "infra", NO_SCHEDULE)])
    assert scheduler.schedule_one(tolerant).node == "tainted"


def test_prefer_no_schedule_taints_lower_the_score() -> None:
    soft = make_node("soft", taints=[Taint("spot", "", names.TAINT_EFFECT_PREFER_NO_SCHEDULE)])
    scheduler = make_scheduler(soft, make_node("plain"))
    for i in range(3):
        assert scheduler.schedule_one(make_pod(f"p{i}", cpu=100)).node == "plain"


def test_cordoned_nodes_take_only_tolerating_pods() -> None:
    scheduler = make_scheduler(make_node("cordoned", unschedulable=True))
    outcome = scheduler.schedule_one(make_pod("p"))
    assert outcome.status.message == "0/1 nodes are available: 1 node(s) were unschedulable."
    daemon = make_pod("d", tolerations=[Toleration(names.TAINT_NODE_UNSCHEDULABLE, "Exists", "", NO_SCHEDULE)])
    assert scheduler.schedule_one(daemon).node == "cordoned"


@pytest.mark.parametrize("target", ["n1", "n2"])
def test_node_name_pins_the_pod(target: str) -> None:
    scheduler = make_scheduler(make_node("n1"), make_node("n2"))
    pod = dataclasses.replace(make_pod("pinned", cpu=100), node_name=target)
    framework = scheduler.frameworks[names.SCHEDULER_NAME]
    assert framework.schedule(CycleState(), PodInfo.of(pod)).node == target


def test_summary_counts_every_node_by_reason() -> None:
    nodes = [make_node(f"gpu-{i}", gpus=1, nics_per_switch=0) for i in range(8)]
    nodes += [make_node(f"infra-{i}", taints=[Taint("dedicated", "infra", NO_SCHEDULE)]) for i in range(4)]
    scheduler = make_scheduler(*nodes)
    outcome = scheduler.schedule_one(make_pod("big", nvidia_gpu=2))
    assert outcome.status.message == (
        "0/12 nodes are available: 8 Insufficient gpu devices, 4 node(s) had untolerated taint {dedicated: infra}."
    )
