"""Restart safety: a scheduler killed with SIGKILL rebuilds everything from the API alone.

- Pods bound before the restart (by us or anyone) hold their devices through their annotation.
- A pod annotated but never bound (the kill came between PreBind's patch and the Binding) holds
  nothing: it is scheduled again, and its annotation is replaced before it is bound, or removed
  when it fits nowhere.
- Killed while pods are being bound and restarted, the scheduler finishes the job: every pod
  bound, no GPU handed to two pods.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from apis.crds.device import DeviceType
from apis.extension import allocation, names
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess
from kube import Client
from tests.support import apiservers
from tests.support.cluster import (
    GPU_QUARTER,
    PodWatch,
    assert_no_device_shared_beyond_capacity,
    condition,
    create_gpu_nodes,
    create_namespace,
    create_pod,
)

pytestmark = pytest.mark.integration


# A cluster per test: a pod left pending by one test would take room in the next.
apiserver = apiservers.apiserver_fixture("function")


def gpus(*minors: int, percent: int = 100, node: str = "") -> str:
    entries = []
    for m in minors:
        resources = {
            names.GPU_CORE: percent,
            names.GPU_MEMORY_RATIO: percent,
            names.GPU_MEMORY: (80 << 30) * percent // 100,
        }
        entries.append(allocation.DeviceAllocation(m, resources, id=f"GPU-{node}-{m:02d}" if node else ""))
    return allocation.encode({DeviceType.GPU: tuple(entries)})


def test_state_left_by_a_crash_is_completed_or_undone(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "restart-a")
    ns = create_namespace(client)
    allocated = names.ANNOTATION_DEVICE_ALLOCATED
    # Bound before "the crash": GPUs 0–5 are taken.
    create_pod(
        client, ns, "running", {names.NVIDIA_GPU: "6"}, annotations={allocated: gpus(*range(6))}, node_name="restart-a"
    )
    # Annotated with GPU 0 (taken!) but never bound: the kill came before the Binding.
    create_pod(client, ns, "half-bound", {names.NVIDIA_GPU: "1"}, annotations={allocated: gpus(0)})
    # Annotated but can never fit now: its stale annotation must go.
    create_pod(client, ns, "hopeless", {names.NVIDIA_GPU: "4"}, annotations={allocated: gpus(1, 2, 3, 4)})
    watch = PodWatch(client, ns)
    try:
        with_scheduler = SchedulerProcess(apiserver.kubeconfig, work_dir)
        with_scheduler.start()
        try:
            pods = watch.wait_for(
                lambda pods: (
                    any(p.name == "half-bound" and p.node_name for p in pods)
                    and any(p.name == "hopeless" and allocated not in p.annotations for p in pods)
                ),
                "half-bound bound and hopeless cleaned up",
            )
        finally:
            assert with_scheduler.stop() == 0
        half = watch.pod("half-bound")
        (gpu,) = allocation.from_pod_annotations(half.annotations)[DeviceType.GPU]
        assert gpu.minor in (6, 7), "the stale GPU 0 annotation must not survive the binding"
        assert_no_device_shared_beyond_capacity(client, pods)
        hopeless = watch.pod("hopeless")
        assert not hopeless.node_name
        assert condition(hopeless) == ("False", "Unschedulable", "0/1 nodes are available: 1 Insufficient gpu devices.")
    finally:
        watch.stop()


def test_kill_while_binding_then_restart_finishes_without_double_allocation(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "kill-a", "kill-b")
    ns = create_namespace(client)
    total = 56  # quarter GPUs: 14 of the 16 GPUs, so every pod fits whatever the order
    watch = PodWatch(client, ns)
    scheduler = SchedulerProcess(apiserver.kubeconfig, work_dir)
    scheduler.start()
    try:
        # Pods keep arriving while the scheduler binds; it is killed mid-stream.
        creator = threading.Thread(
            target=lambda: [create_pod(client, ns, f"p-{i:02d}", GPU_QUARTER) for i in range(total)]
        )
        creator.start()
        watch.wait_bound(8)
        scheduler.kill()
        bound_at_kill = sum(1 for p in watch.pods() if p.node_name)
        creator.join(60)
        assert bound_at_kill < total, "the kill should come while pods are still pending"
        scheduler.start()
        pods = watch.wait_for(
            lambda pods: len(pods) == total and all(p.node_name for p in pods), "every pod bound after the restart"
        )
    finally:
        scheduler.stop()
        watch.stop()
    assert_no_device_shared_beyond_capacity(client, pods)
    for pod in pods:
        (gpu,) = allocation.from_pod_annotations(pod.annotations)[DeviceType.GPU]
        assert gpu.resources[names.GPU_CORE] == 25 and gpu.id == f"GPU-{pod.node_name}-{gpu.minor:02d}"
