"""DeviceShare around allocations the scheduler did not make: nothing more lands on an over-committed
device, and nothing of a type lands on a node where a pod's devices of that type are unknown."""

from __future__ import annotations

import dataclasses

from apis.crds.device import DeviceType
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.k8s.meta import ObjectMeta
from scheduler.core import with_scoring
from scheduler.framework.config import SchedulerConfig
from scheduler.framework.scoring import ScoringStrategyType
from scheduler.simulation.cluster import GIB
from tests.support.builders import allocated, bound_pod, gpu_alloc, make_node, make_pod
from tests.support.scheduling import make_scheduler


def test_an_over_committed_gpu_is_full_even_where_it_looks_free() -> None:
    # GPU 0 of a one-GPU node: a half by the scheduler, and 100 % gpu-core claimed past it by a
    # pod created with spec.nodeName. Its memory still looks half free.
    scheduler = make_scheduler(make_node("n1", gpus=1, nics_per_switch=0))
    scheduler.cache.add_pod(bound_pod("infer-half-a", "n1", gpu_alloc(0, 50), gpu_core=50, gpu_ratio=50))
    intruder = DeviceAllocation(minor=0, resources={names.GPU_CORE: 100})
    scheduler.cache.add_pod(bound_pod("intruder", "n1", intruder, gpu_core=100))
    outcome = scheduler.schedule_one(make_pod("mem", gpu_memory=20 * GIB))
    assert outcome.node is None
    assert outcome.diagnosis.reasons_by_node() == {
        "n1": [
            "Insufficient gpu devices",
            "gpu 0 is over-committed: gpu-core 150/100; held by default/infer-half-a, default/intruder: "
            "nothing more is placed on it",
        ]
    }
    scheduler.cache.remove_pod(bound_pod("intruder", "n1", intruder))
    assert scheduler.schedule_one(make_pod("mem", gpu_memory=20 * GIB)).node == "n1"


def test_a_share_goes_to_another_gpu_than_the_over_committed_one() -> None:
    # Packing would pick the fullest GPU that fits: the over-committed one, were it not full.
    packing = with_scoring(SchedulerConfig(), ScoringStrategyType.MOST_ALLOCATED)
    scheduler = make_scheduler(make_node("n1", nics_per_switch=0), config=packing)
    scheduler.cache.add_pod(bound_pod("a", "n1", gpu_alloc(0, 60), gpu_core=60, gpu_ratio=60))
    scheduler.cache.add_pod(bound_pod("b", "n1", DeviceAllocation(0, {names.GPU_CORE: 60}), gpu_core=60))
    outcome = scheduler.schedule_one(make_pod("small", gpu_memory=GIB))
    assert outcome.node == "n1"
    assert allocated(outcome.annotations) == {"gpu": [1]}


def test_a_vf_held_twice_is_not_handed_out_again_nor_its_nic_used() -> None:
    scheduler = make_scheduler(make_node("n1", gpus=2, numa_nodes=1, pcie_per_numa=1, vfs_per_nic=2))
    vf = VFAllocation(minor=0, bus_id="0000:1f:00.1")
    nic = DeviceAllocation(minor=0, resources={names.RDMA: 1}, vfs=(vf,))
    for name in ("first", "second"):
        scheduler.cache.add_pod(bound_pod(name, "n1", nic, dtype=DeviceType.RDMA, rdma=1))
    outcome = scheduler.schedule_one(make_pod("nic", rdma=1))
    assert outcome.node is None
    assert "rdma 0 is over-committed: VF 0000:1f:00.1 held twice" in outcome.status.message


def test_unknown_gpus_on_a_node_keep_new_gpu_pods_off_it_until_fixed() -> None:
    scheduler = make_scheduler(
        make_node("n1", nics_per_switch=0, labels={"pool": "one"}), make_node("n2", nics_per_switch=0)
    )
    garbled = make_pod(
        "frac-06", node="n1", annotations={names.ANNOTATION_DEVICE_ALLOCATED: "{garbage"}, gpu_core=30, gpu_ratio=30
    )
    scheduler.cache.add_pod(garbled)
    placed = [scheduler.schedule_one(make_pod(f"p{i}", gpu_core=30, gpu_ratio=30)).node for i in range(3)]
    assert placed == ["n2", "n2", "n2"]
    assert scheduler.schedule_one(make_pod("cpu-only", cpu=1000)).node in ("n1", "n2")
    only_n1 = make_pod("pinned", node_selector={"pool": "one"}, gpu_core=30, gpu_ratio=30)
    outcome = scheduler.schedule_one(only_n1)
    assert outcome.node is None
    assert outcome.diagnosis.reasons_by_node()["n1"] == [
        "gpu devices in use by default/frac-06 are unknown (device-allocated annotation unreadable or missing): "
        "no gpu device is given out on this node until it is fixed or the pod is deleted"
    ]
    fixed = {names.ANNOTATION_DEVICE_ALLOCATED: allocation.encode({DeviceType.GPU: (gpu_alloc(0, 30),)})}
    meta: ObjectMeta = dataclasses.replace(garbled.meta, annotations=fixed)
    scheduler.cache.update_pod(dataclasses.replace(garbled, meta=meta))
    outcome = scheduler.schedule_one(only_n1)
    assert outcome.node == "n1"
