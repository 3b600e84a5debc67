"""Never double-book a GPU, live: `tessera scheduler` as `tessera up` starts it, against the embedded API server.

What users and operators ran into with `make run`, each against a fresh cluster:

- a pod created with `spec.nodeName` and its own `device-allocated` annotation over-commits a
  GPU: Warning Events on the pod and the node, the metric, and nothing more placed there;
- a garbled annotation on a bound pod does not free its GPU share, neither at once nor after a
  restart of the scheduler (then the node's GPUs count as possibly in use until it is fixed);
- a pod that names no scheduler is scheduled (`tessera up` serves `default-scheduler`), and a
  bound pod gets kube-scheduler's `Scheduled` Event;
- a pod whose request is invalid waits for a fix of the pod, not for cluster changes, and
  `tessera explain` says to fix it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from apis.crds.device import DeviceType
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation
from apis.k8s.core import Pod
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess, pod_manifest
from cli.localcluster import components
from kube import Client, resources
from proto.scheduler.v1 import scheduler_pb2 as pb
from proto.scheduler.v1 import scheduler_pb2_grpc
from scheduler.simulation.cluster import NodeShape
from tests.support import apiservers
from tests.support.cluster import (
    GPU_HALF,
    PodWatch,
    assert_no_device_shared_beyond_capacity,
    condition,
    create_gpu_nodes,
    create_namespace,
    create_pod,
    wait_for_event,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
ONE_GPU = NodeShape(gpus=1, nics_per_switch=0)
GARBAGE = "{garbage"


def share(percent: int) -> dict[str, str]:
    return {names.GPU_CORE: str(percent), names.GPU_MEMORY_RATIO: str(percent)}


def gpu0(percent: int) -> str:
    """A device-allocated annotation for `percent` % of GPU 0 (80Gi)."""
    amounts = {names.GPU_CORE: percent, names.GPU_MEMORY_RATIO: percent, names.GPU_MEMORY: (80 << 30) * percent // 100}
    return allocation.encode({DeviceType.GPU: (DeviceAllocation(0, amounts),)})


# A cluster per test: the scheduler sees every node, and each test wants its own.
apiserver = apiservers.apiserver_fixture("function")


@pytest.fixture
def scheduler(apiserver: EmbeddedAPIServer, work_dir: Path) -> Iterator[SchedulerProcess]:
    """The scheduler exactly as `tessera up` configures it."""
    process = components.scheduler(work_dir, apiserver.kubeconfig, grpc_address=f"unix://{work_dir}/s.sock").process
    assert isinstance(process, SchedulerProcess)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def ns(client: Client) -> str:
    return create_namespace(client)


@pytest.fixture
def watch(client: Client, ns: str) -> Iterator[PodWatch]:
    w = PodWatch(client, ns)
    try:
        yield w
    finally:
        w.stop()


def explain(scheduler: SchedulerProcess, namespace: str, name: str) -> pb.ExplainResponse:
    with grpc.insecure_channel(scheduler.grpc_address) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)  # type: ignore[no-untyped-call]  # generated, untyped
        response: pb.ExplainResponse = stub.Explain(pb.ExplainRequest(namespace=namespace, name=name), timeout=30)
        return response


def annotate(client: Client, namespace: str, name: str, value: str) -> None:
    """`kubectl annotate pod NAME --overwrite device-allocated=VALUE`."""
    patch = {"metadata": {"annotations": {names.ANNOTATION_DEVICE_ALLOCATED: value}}}
    client.resource(resources.PODS).patch(name, patch, namespace=namespace)


def placed_or_refused(watch: PodWatch, name: str) -> Pod:
    """The pod once it is bound or has PodScheduled=False, whichever comes first."""

    def decided(pods: list[Pod]) -> bool:
        pod = next((p for p in pods if p.name == name), None)
        return pod is not None and (bool(pod.node_name) or (condition(pod) or ("",))[0] == "False")

    watch.wait_for(decided, f"{name} bound or refused")
    return watch.pod(name)


def test_a_pre_bound_pod_that_over_commits_a_gpu_is_reported_and_nothing_more_lands_there(
    client: Client, ns: str, watch: PodWatch, scheduler: SchedulerProcess
) -> None:
    create_gpu_nodes(client, "sim-1", shape=ONE_GPU)
    create_pod(client, ns, "infer-half-a", GPU_HALF)
    watch.wait_bound(1)
    # Created with spec.nodeName and a hand-written annotation: 100 % gpu-core of GPU 0.
    claim = allocation.encode({DeviceType.GPU: (DeviceAllocation(0, {names.GPU_CORE: 100}),)})
    create_pod(
        client,
        ns,
        "intruder",
        {names.GPU_CORE: "100"},
        annotations={names.ANNOTATION_DEVICE_ALLOCATED: claim},
        node_name="sim-1",
    )
    message = (
        f"gpu 0 is over-committed: gpu-core 150/100; held by {ns}/infer-half-a, {ns}/intruder on node sim-1; "
        "the scheduler places nothing more on it until a holder is deleted or its annotation is fixed"
    )
    (on_pod,) = wait_for_event(client, ns, "intruder", "DeviceOvercommitted", message)
    (on_node,) = wait_for_event(client, "default", "sim-1", "DeviceOvercommitted", message)
    assert on_pod["type"] == on_node["type"] == "Warning"
    assert on_node["involvedObject"]["kind"] == "Node"
    assert scheduler.metric("tessera_scheduler_overcommitted_devices", {"node": "sim-1"}) == 1
    # Its memory looks 60Gi free; a pod asking for memory alone still does not go there.
    create_pod(client, ns, "mem", {names.GPU_MEMORY: "10Gi"})
    mem = placed_or_refused(watch, "mem")
    assert not mem.node_name
    reasons = [r.reason for node in explain(scheduler, ns, "mem").nodes for r in node.reasons]
    assert f"gpu 0 is over-committed: gpu-core 150/100; held by {ns}/infer-half-a, {ns}/intruder: " in " ".join(reasons)
    client.resource(resources.PODS).delete("intruder", namespace=ns)
    watch.wait_for(lambda pods: any(p.name == "mem" and p.node_name for p in pods), "mem bound once intruder left")
    assert scheduler.metric("tessera_scheduler_overcommitted_devices", {"node": "sim-1"}) == 0
    assert_no_device_shared_beyond_capacity(client, [p for p in watch.pods() if p.node_name])


def test_a_garbled_annotation_never_frees_the_share_not_even_across_a_restart(
    client: Client, ns: str, watch: PodWatch, scheduler: SchedulerProcess
) -> None:
    create_gpu_nodes(client, "g-1", shape=ONE_GPU)
    create_pod(client, ns, "frac", share(60))
    watch.wait_bound(1)
    annotate(client, ns, "frac", GARBAGE)
    (event,) = wait_for_event(client, ns, "frac", "InvalidDeviceAllocation")
    assert event["type"] == "Warning"
    assert names.ANNOTATION_DEVICE_ALLOCATED in event["message"] and "not valid JSON" in event["message"]
    assert "keeps counting its last valid allocation (gpu 0)" in event["message"]
    # 60 % is still in use: 50 % more does not fit (it would be 110 %).
    create_pod(client, ns, "next", share(50))
    assert not placed_or_refused(watch, "next").node_name
    client.resource(resources.PODS).delete("next", namespace=ns)
    # A restarted scheduler first sees the garbage: which GPU the pod holds is unknown.
    scheduler.stop()
    scheduler.start()
    create_pod(client, ns, "small", share(30))
    small = placed_or_refused(watch, "small")
    assert not small.node_name
    _, _, refused = condition(small) or ("", "", "")
    assert f"gpu devices in use by {ns}/frac are unknown" in refused
    assert "which devices it uses is unknown" in explain(scheduler, ns, "frac").detail
    # Fixed: counted again as written, and the node's other 40 % is given out.
    annotate(client, ns, "frac", gpu0(60))
    watch.wait_for(lambda pods: any(p.name == "small" and p.node_name for p in pods), "small bound after the fix")
    small = watch.pod("small")
    assert [a.minor for a in allocation.from_pod_annotations(small.annotations)[DeviceType.GPU]] == [0]
    assert_no_device_shared_beyond_capacity(client, [p for p in watch.pods() if p.node_name])


def test_a_pod_that_names_no_scheduler_is_scheduled_and_told_where(
    client: Client, ns: str, watch: PodWatch, scheduler: SchedulerProcess
) -> None:
    create_gpu_nodes(client, "d-1")
    manifest = pod_manifest("plain", {names.CPU: "1", names.MEMORY: "1Gi", **GPU_HALF}, namespace=ns)
    del manifest["spec"]["schedulerName"]  # the API server fills in default-scheduler
    client.resource(resources.PODS).create(manifest, namespace=ns)
    (pod,) = watch.wait_bound(1)
    assert pod.scheduler_name == "default-scheduler" and pod.node_name == "d-1"
    assert names.ANNOTATION_DEVICE_ALLOCATED in pod.annotations
    (event,) = wait_for_event(client, ns, "plain", "Scheduled")
    assert (event["type"], event["message"]) == ("Normal", f"Successfully assigned {ns}/plain to d-1")


def test_an_invalid_request_waits_for_a_fix_of_the_pod_not_for_cluster_changes(
    client: Client, ns: str, watch: PodWatch, scheduler: SchedulerProcess
) -> None:
    create_gpu_nodes(client, "i-1")
    create_pod(client, ns, "invalid", share(150))
    create_pod(client, ns, "too-big", {names.NVIDIA_GPU: "9"})
    for name in ("invalid", "too-big"):
        assert not placed_or_refused(watch, name).node_name
    # A node arrives: it concerns the pod that fits nowhere, not the one whose request is wrong.
    create_gpu_nodes(client, "i-2")
    wait_for(
        lambda: explain(scheduler, ns, "too-big").attempts >= 2, timeout_s=60, what="too-big tried again", poll_s=0.1
    )
    invalid = explain(scheduler, ns, "invalid")
    assert (invalid.queue, invalid.attempts, list(invalid.waiting_for)) == ("unschedulable", 1, [])
    result = subprocess.run(
        [sys.executable, "-m", "cli", "explain", f"{ns}/invalid", "--scheduler", scheduler.grpc_address],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert (
        "Fix the pod: invalid device request: koordinator.sh/gpu-core=150 must be <= 100 or a multiple of 100 "
        "(retried only when the pod changes)"
    ) in result.stdout
    assert "Retried when a cluster change" not in result.stdout
