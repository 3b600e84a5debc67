"""The cluster's GPUs by model, and the weight a shape that accepts few of them gets."""

from __future__ import annotations

from scheduler import fragmentation
from scheduler.cache import ClusterCache
from scheduler.fragmentation import GPUSupply, NodeResources, TargetWorkload, TaskShape
from scheduler.framework.interfaces import Handle
from scheduler.simulation.cluster import NodeShape, gpu_node


def add(cache: ClusterCache, name: str, model: str, gpus: int) -> None:
    node, device = gpu_node(name, NodeShape(gpus=gpus, gpu_model=model))
    cache.add_node(node)
    cache.add_device(device)


def test_scarcity_is_all_gpus_over_the_gpus_a_shape_accepts() -> None:
    supply = GPUSupply((("G2", 60), ("P100", 10), ("T4", 30)))
    assert supply.total == 100
    assert supply.scarcity(frozenset()) == 1.0
    assert supply.scarcity(frozenset({"P100"})) == 10.0
    assert supply.scarcity(frozenset({"P100", "T4"})) == 2.5
    # A model the cluster does not have: the shape runs nowhere, its weight does not matter.
    assert supply.scarcity(frozenset({"A100"})) == 1.0


def test_tracker_follows_nodes_added_changed_and_removed() -> None:
    cache = ClusterCache()
    tracker = fragmentation.SupplyTracker(cache)
    assert tracker.current() == GPUSupply()
    add(cache, "a", "G2", 8)
    add(cache, "b", "P100", 2)
    first = tracker.current()
    assert first == GPUSupply((("G2", 8), ("P100", 2)))
    assert tracker.current() is first  # nothing changed: the same object
    add(cache, "b", "T4", 4)  # relabelled and regrown
    assert tracker.current() == GPUSupply((("G2", 8), ("T4", 4)))
    cache.remove_node("a")
    assert tracker.current() == GPUSupply((("T4", 4),))


def test_tracker_is_shared_per_profile() -> None:
    handle = Handle(ClusterCache(), "tessera")
    assert fragmentation.shared_supply(handle) is fragmentation.shared_supply(handle)
    assert fragmentation.shared_supply(Handle(ClusterCache(), "tessera")) is not fragmentation.shared_supply(handle)


def test_a_gpu_of_a_scarce_model_costs_its_shapes_more() -> None:
    # One whole GPU taken from an idle P100 GPU: the shapes that could use it lose it. Without
    # supply both shapes weigh 1 (loss 200); with P100 a tenth of the GPUs, the P100 shape
    # weighs its popularity per GPU it can use, 10 (loss 1,100, in thousandths of a weight).
    workload = TargetWorkload(
        ((TaskShape(gpus=1, gpu_percent=100), 1), (TaskShape(gpus=1, gpu_percent=100, models=frozenset({"P100"})), 1)),
        1,
    )
    node = NodeResources(milli_cpu=64_000, memory=1 << 40, gpu_model="P100", gpu_free=(100, 100))
    plain = fragmentation.WorkloadIndex(workload)
    assert plain.table(node).loss(0, 0, ((0, 100),)) == 200
    scarce = fragmentation.WorkloadIndex(workload, supply=GPUSupply((("G2", 90), ("P100", 10))))
    assert scarce.table(node).loss(0, 0, ((0, 100),)) == 1000 * 100 + 10_000 * 100
    assert scarce.total_weight == 2000  # a task of the workload: scaled alike
    # On a G2 node only the shape that accepts any model counts: the same as without supply.
    g2 = NodeResources(milli_cpu=64_000, memory=1 << 40, gpu_model="G2", gpu_free=(100, 100))
    assert scarce.table(g2).loss(0, 0, ((0, 100),)) * plain.total_weight == 100 * scarce.total_weight


def test_a_workload_without_model_constraints_is_measured_as_before() -> None:
    workload = TargetWorkload(((TaskShape(gpus=1, gpu_percent=50), 3), (TaskShape(gpus=2, gpu_percent=100), 1)), 1)
    index = fragmentation.WorkloadIndex(workload, supply=GPUSupply((("G2", 90), ("P100", 10))))
    plain = fragmentation.WorkloadIndex(workload)
    node = NodeResources(milli_cpu=64_000, memory=1 << 40, gpu_model="P100", gpu_free=(100, 60))
    assert index.total_weight == plain.total_weight
    assert index.table(node).loss(0, 0, ((1, 50),)) == plain.table(node).loss(0, 0, ((1, 50),))


def test_the_learner_rebuilds_its_index_when_the_supply_changes() -> None:
    whole = TaskShape(gpus=1, gpu_percent=100)
    learner = fragmentation.WorkloadLearner(fragmentation.WorkloadArgs(shapes=((whole, 1),)))
    supply = GPUSupply((("G2", 8),))
    first = learner.index(supply)
    assert learner.index(GPUSupply((("G2", 8),))) is first  # an equal supply: the same index
    second = learner.index(GPUSupply((("G2", 16),)))
    assert second is not first and second.version != first.version
    off = fragmentation.WorkloadLearner(
        fragmentation.WorkloadArgs(shapes=((TaskShape(gpus=1, gpu_percent=100), 1),), model_scarcity=False)
    )
    assert off.index(supply).supply == GPUSupply()
