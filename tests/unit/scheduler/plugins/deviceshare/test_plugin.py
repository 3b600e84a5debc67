"""DeviceShare through the whole cycle: reasons, the annotation it writes, Reserve/Unreserve."""

from __future__ import annotations

import json
from typing import Any

from apis.crds.device import Device, DeviceType
from apis.extension import hints, names
from apis.k8s.core import Node
from scheduler.cache import PodInfo
from scheduler.core import with_scoring
from scheduler.framework.config import SchedulerConfig
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.scoring import ScoringStrategyType
from scheduler.framework.status import Code
from tests.support.builders import allocated, bound_pod, gpu_alloc, make_node, make_pod, with_nvlink
from tests.support.scheduling import make_scheduler


def test_annotation_is_the_exact_protocol_format() -> None:
    scheduler = make_scheduler(make_node("n1", nics_per_switch=0))
    outcome = scheduler.schedule_one(make_pod("half", gpu_core=50, gpu_ratio=50))
    assert outcome.node == "n1"
    assert outcome.annotations[names.ANNOTATION_DEVICE_ALLOCATED] == (
        '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"50",'
        '"koordinator.sh/gpu-memory":"40Gi","koordinator.sh/gpu-memory-ratio":"50"},"id":"GPU-n1-00"}]}'
    )


def test_rdma_vf_annotation_carries_the_vf() -> None:
    scheduler = make_scheduler(make_node("n1"))
    outcome = scheduler.schedule_one(make_pod("nic", rdma=1))
    doc = json.loads(outcome.annotations[names.ANNOTATION_DEVICE_ALLOCATED])
    assert doc == {
        "rdma": [
            {
                "minor": 0,
                "resources": {"koordinator.sh/rdma": "1"},
                "id": "0000:1f:00.0",
                "extension": {"vfs": [{"busID": "0000:1f:00.1"}]},  # minor 0: omitted, as Go's omitempty
            }
        ]
    }


def test_invalid_request_is_unresolvable_with_the_rule() -> None:
    scheduler = make_scheduler(make_node("n1"))
    outcome = scheduler.schedule_one(make_pod("bad", gpu_core=150, gpu_ratio=150))
    assert outcome.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert outcome.status.plugin == "DeviceShare"
    assert outcome.status.message == (
        "0/1 nodes are available: invalid device request: "
        "koordinator.sh/gpu-core=150 must be <= 100 or a multiple of 100."
    )


def test_malformed_hint_is_unresolvable_with_the_annotation_named() -> None:
    scheduler = make_scheduler(make_node("n1"))
    pod = make_pod("bad", nvidia_gpu=1, annotations={names.ANNOTATION_DEVICE_ALLOCATE_HINT: "{oops"})
    outcome = scheduler.schedule_one(pod)
    assert outcome.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "annotation scheduling.koordinator.sh/device-allocate-hint: not valid JSON" in outcome.status.message


def test_node_without_device_cr_cannot_give_gpus() -> None:
    node, _ = make_node("bare")
    scheduler = make_scheduler()
    scheduler.cache.add_node(node)
    outcome = scheduler.schedule_one(make_pod("p", nvidia_gpu=1))
    assert outcome.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert outcome.diagnosis.reasons_by_node() == {"bare": ["Insufficient gpu devices"]}


def test_pods_without_devices_skip_deviceshare() -> None:
    scheduler = make_scheduler(make_node("n1"))
    outcome = scheduler.schedule_one(make_pod("cpu-only", cpu=1000))
    assert outcome.scheduled and outcome.annotations == {}


def test_reserve_then_unreserve_restores_usage_exactly() -> None:
    scheduler = make_scheduler(make_node("n1"), make_node("n2"))
    scheduler.cache.add_pod(bound_pod("running", "n1", gpu_alloc(0, 50)))
    before = {n: scheduler.cache.device_usage(n) for n in ("n1", "n2")}
    framework = scheduler.frameworks[names.SCHEDULER_NAME]
    pod = PodInfo.of(make_pod("p", nvidia_gpu=2, rdma=1))
    state = CycleState()
    result = framework.schedule(state, pod)
    assert result.node is not None
    scheduler.cache.assume(pod, result.node)
    assert framework.run_reserve(state, pod, result.node).is_success
    assert scheduler.cache.device_usage(result.node) != before[result.node]
    framework.run_unreserve(state, pod, result.node)
    framework.run_unreserve(state, pod, result.node)  # idempotent
    scheduler.cache.forget(pod.ident)
    assert {n: scheduler.cache.device_usage(n) for n in ("n1", "n2")} == before


def test_committed_pods_are_never_given_the_same_whole_gpu() -> None:
    scheduler = make_scheduler(make_node("n1", gpus=2, nics_per_switch=0))
    first = scheduler.schedule_one(make_pod("a", nvidia_gpu=1))
    second = scheduler.schedule_one(make_pod("b", nvidia_gpu=1))
    third = scheduler.schedule_one(make_pod("c", nvidia_gpu=1))
    assert allocated(first.annotations)["gpu"] != allocated(second.annotations)["gpu"]
    assert third.status.code is Code.UNSCHEDULABLE
    assert third.status.message == "0/1 nodes are available: 1 Insufficient gpu devices."


def test_nodes_alike_get_their_own_device_ids() -> None:
    scheduler = make_scheduler(make_node("n1"), make_node("n2"))
    scheduler.cache.add_pod(bound_pod("hog", "n1", *(gpu_alloc(m) for m in range(8))))
    outcome = scheduler.schedule_one(make_pod("p", nvidia_gpu=1, rdma=1))
    doc = json.loads(outcome.annotations[names.ANNOTATION_DEVICE_ALLOCATED])
    assert outcome.node == "n2"
    assert doc["gpu"][0]["id"] == "GPU-n2-00"
    scheduler2 = make_scheduler(make_node("n1"), make_node("n2"))
    first = scheduler2.schedule_one(make_pod("a", nvidia_gpu=8))
    second = scheduler2.schedule_one(make_pod("b", nvidia_gpu=1))
    assert {first.node, second.node} == {"n1", "n2"}
    ids = json.loads(second.annotations[names.ANNOTATION_DEVICE_ALLOCATED])["gpu"][0]["id"]
    assert ids.startswith(f"GPU-{second.node}-")


def test_scoring_prefers_emptier_or_fuller_nodes() -> None:
    for strategy, expected in ((ScoringStrategyType.LEAST_ALLOCATED, "n2"), (ScoringStrategyType.MOST_ALLOCATED, "n1")):
        scheduler = make_scheduler(make_node("n1"), make_node("n2"), config=with_scoring(SchedulerConfig(), strategy))
        scheduler.cache.add_pod(bound_pod("a", "n1", gpu_alloc(0, 50), cpu=1000))
        assert scheduler.schedule_one(make_pod("p", gpu_core=20, gpu_ratio=20, cpu=1000)).node == expected


def test_joint_annotation_lists_an_rdma_vf_per_gpu_switch() -> None:
    # Koordinator's "allocate 6 GPU and 3 VF", written as Koordinator writes several devices.
    scheduler = make_scheduler(make_node("n1"))
    rule = hints.encode_joint_allocate(hints.JointAllocate((DeviceType.GPU, DeviceType.RDMA)))
    pod = make_pod("mpi", nvidia_gpu=6, rdma=1, annotations={names.ANNOTATION_DEVICE_JOINT_ALLOCATE: rule})
    outcome = scheduler.schedule_one(pod)
    doc = json.loads(outcome.annotations[names.ANNOTATION_DEVICE_ALLOCATED])
    assert [g["minor"] for g in doc["gpu"]] == [0, 1, 2, 3, 4, 5]
    assert doc["rdma"] == [
        {
            "minor": k,
            "resources": {"koordinator.sh/rdma": "1"},
            "id": f"0000:{bus}:00.0",
            "extension": {"vfs": [{"busID": f"0000:{bus}:00.1"}]},  # minor 0 omitted (omitempty)
        }
        for k, bus in enumerate(("1f", "3f", "5f"))
    ]
    used = {u.minor: u.used for u in scheduler.cache.device_usage("n1") if u.type is DeviceType.RDMA}
    assert used == {0: {names.RDMA: 1}, 1: {names.RDMA: 1}, 2: {names.RDMA: 1}, 3: {}}


def test_nodes_alike_but_for_nvlink_do_not_share_a_decision() -> None:
    """The first pod's decision on a plain node is memoised for nodes built alike; a node whose
    Device adds NVLink must not reuse it."""
    plain = make_node("plain", labels={"pool": "plain"})
    bridged = with_nvlink(make_node("bridged", labels={"pool": "bridged"}), (0, 2), (1, 3))
    scheduler = make_scheduler(plain, bridged)
    first = scheduler.schedule_one(make_pod("a", nvidia_gpu=2, node_selector={"pool": "plain"}))
    second = scheduler.schedule_one(make_pod("b", nvidia_gpu=2, node_selector={"pool": "bridged"}))
    assert (first.node, allocated(first.annotations)["gpu"]) == ("plain", [0, 1])
    assert (second.node, allocated(second.annotations)["gpu"]) == ("bridged", [0, 2])


def _koordlet_node() -> tuple[Node, Device]:
    """k8s-node1 of gpu-and-rdma-joint-allocation.md as koordlet writes it: 4 GPUs (two per root
    complex), 3 RDMA PFs on pci0000:00, the first with one VF of `minor: -1`, socketID -1."""

    def dev(pcie: str, bus: str, minor: int, dtype: str, **more: Any) -> dict[str, Any]:
        topology = {"socketID": -1, "nodeID": 0, "pcieID": pcie, "busID": bus}
        return {"type": dtype, "minor": minor, "health": True, "topology": topology, **more}

    gpu = {names.GPU_CORE: "100", names.GPU_MEMORY: "23040Mi", names.GPU_MEMORY_RATIO: "100"}
    vfs = [{"vfs": [{"minor": -1, "busID": "0000:01:00.2"}]}]
    devices = [
        dev("pci0000:00", "0000:02:00.0", 0, "gpu", id="GPU-0", resources=gpu),
        dev("pci0000:00", "0000:01:00.0", 0, "rdma", id="0000:01:00.0", resources={names.RDMA: "100"}, vfGroups=vfs),
        dev("pci0000:00", "0000:03:00.0", 1, "gpu", id="GPU-1", resources=gpu),
        dev("pci0000:00", "0000:01:00.1", 1, "rdma", id="0000:01:00.1", resources={names.RDMA: "100"}),
        dev("pci0000:80", "0000:82:00.0", 2, "gpu", id="GPU-2", resources=gpu),
        dev("pci0000:00", "0000:05:00.0", 2, "rdma", id="0000:05:00.0", resources={names.RDMA: "100"}),
        dev("pci0000:80", "0000:83:00.0", 3, "gpu", id="GPU-3", resources=gpu),
    ]
    device = Device.from_dict({"metadata": {"name": "k8s-node1"}, "spec": {"devices": devices}})
    allocatable = {"cpu": "32", "memory": "128Gi", "pods": "110", names.KOORD_GPU: "400", names.RDMA: "300"}
    allocatable.update({names.GPU_CORE: "400", names.GPU_MEMORY_RATIO: "400", names.GPU_MEMORY: "92160Mi"})
    node = Node.from_dict({"metadata": {"name": "k8s-node1"}, "status": {"allocatable": allocatable}})
    return node, device


def test_koordlets_vfs_of_minor_minus_one_are_allocated_jointly_and_never_twice() -> None:
    """The joint-allocation manual's pod-vf01 on koordlet's Device: GPU and VF from the same PCIe,
    the VF named by its PCI address; a second such pod finds no free VF and is refused."""
    scheduler = make_scheduler(_koordlet_node())
    annotations = {
        names.ANNOTATION_DEVICE_JOINT_ALLOCATE: '{"deviceTypes":["gpu","rdma"]}',
        names.ANNOTATION_DEVICE_ALLOCATE_HINT: '{"rdma":{"vfSelector":{}}}',
    }
    first = scheduler.schedule_one(make_pod("pod-vf01", annotations=annotations, koord_gpu=100, rdma=100))
    assert first.node == "k8s-node1"
    assert json.loads(first.annotations[names.ANNOTATION_DEVICE_ALLOCATED]) == {
        "gpu": [
            {
                "minor": 0,
                "resources": {
                    names.GPU_CORE: "100",
                    names.GPU_MEMORY: "23040Mi",
                    names.GPU_MEMORY_RATIO: "100",
                },
                "id": "GPU-0",
            }
        ],
        "rdma": [
            {
                "minor": 0,
                "resources": {names.RDMA: "100"},
                "id": "0000:01:00.0",
                "extension": {"vfs": [{"minor": -1, "busID": "0000:01:00.2"}]},
            }
        ],
    }
    second = scheduler.schedule_one(make_pod("pod-vf02", annotations=annotations, koord_gpu=100, rdma=100))
    assert not second.scheduled


def test_a_joint_allocation_of_one_or_a_repeated_type_is_scheduled_not_refused() -> None:
    """Koordinator only filters `deviceTypes` (to the types asked for): a list of one type, or
    one type twice, is placed as if there were no joint rule."""
    scheduler = make_scheduler(make_node("n1"))
    for i, rule in enumerate(('{"deviceTypes":["gpu"]}', '{"deviceTypes":["gpu","gpu"],"requiredScope":"SamePCIe"}')):
        pod = make_pod(f"p{i}", nvidia_gpu=1, annotations={names.ANNOTATION_DEVICE_JOINT_ALLOCATE: rule})
        outcome = scheduler.schedule_one(pod)
        assert outcome.scheduled, outcome.status
        assert list(json.loads(outcome.annotations[names.ANNOTATION_DEVICE_ALLOCATED])) == ["gpu"]
