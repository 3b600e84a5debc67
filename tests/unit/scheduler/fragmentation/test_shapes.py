"""The shape of a pod as the target workload counts it, and a workload counted from pods."""

from __future__ import annotations

from scheduler import fragmentation
from scheduler.cache import PodInfo
from scheduler.fragmentation import TaskShape
from tests.support.builders import make_pod


def test_task_shape_of_pods() -> None:
    share = PodInfo.of(
        make_pod(
            cpu=4000, memory=8 << 30, gpu_core=30, gpu_ratio=30, node_selector={"node.koordinator.sh/gpu-model": "A100"}
        )
    )
    assert fragmentation.task_shape(share) == TaskShape(4000, 8 << 30, 1, 30, frozenset({"A100"}))
    whole = PodInfo.of(make_pod(cpu=1000, nvidia_gpu=2))
    assert fragmentation.task_shape(whole) == TaskShape(1000, 0, 2, 100)
    assert fragmentation.task_shape(PodInfo.of(make_pod(cpu=500))) == TaskShape(500)


def test_workload_of_counts_shapes_most_common_first() -> None:
    pods = [make_pod(f"p{i}", cpu=1000, gpu_core=50, gpu_ratio=50) for i in range(3)] + [make_pod("q", cpu=1000)]
    assert fragmentation.workload_of(PodInfo.of(p) for p in pods) == (
        (TaskShape(1000, 0, 1, 50), 3),
        (TaskShape(1000), 1),
    )
