"""Acceptance on real containerd + runc: what a container sees when created through the proxy."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import grpc
import pytest
from cri_api.v1 import api_pb2 as cri

from agent.hooks import GPUEnvPlugin, HookPlugin, RDMADevicesPlugin
from apis.extension import names
from proto.runtime.v1alpha1 import api_pb2 as hook
from tests.integration.runtimeproxy.rig import Recorder, Rig, gpu_annotation

pytestmark = [pytest.mark.integration, pytest.mark.root]


def test_allocated_gpus_are_visible_in_the_container(rig: Rig) -> None:
    rig.hook_server(GPUEnvPlugin())
    rig.proxy()
    kubelet = rig.kubelet()
    pod, config = rig.run_pod(kubelet, "gpu-pod", annotations=gpu_annotation(2, 3))
    container = kubelet.run_container(pod, config, "main")
    assert kubelet.env(container)["NVIDIA_VISIBLE_DEVICES"] == "2,3"


def test_pod_without_devices_is_unchanged(rig: Rig) -> None:
    rig.hook_server(GPUEnvPlugin())
    rig.proxy()
    kubelet = rig.kubelet()
    envs = {"APP": "web"}
    pod, config = rig.run_pod(kubelet, "plain", annotations={"team": "a"})
    through_proxy = kubelet.env(kubelet.run_container(pod, config, "main", envs=envs))
    pod, config = rig.run_pod(rig.direct, "plain-direct", annotations={"team": "a"})
    direct = rig.direct.env(rig.direct.run_container(pod, config, "main", envs=envs))
    assert through_proxy == direct
    assert "NVIDIA_VISIBLE_DEVICES" not in through_proxy


def test_skip_label_bypasses_every_hook(rig: Rig) -> None:
    recorder = Recorder()
    rig.hook_server(GPUEnvPlugin(), recorder)
    rig.proxy()
    kubelet = rig.kubelet()
    labels = {names.LABEL_SKIP_HOOKSERVER: "true"}
    pod, config = rig.run_pod(kubelet, "skipped", annotations=gpu_annotation(2, 3), labels=labels)
    container = kubelet.run_container(pod, config, "main")
    assert "NVIDIA_VISIBLE_DEVICES" not in kubelet.env(container)
    kubelet.stop_container(container)
    kubelet.remove_pod(pod)
    assert recorder.hooks() == []


def test_hook_server_down_under_ignore_creates_the_container_and_warns(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    down = rig.workdir / "agent-down.sock"
    rig.register(down, policy="Ignore")
    rig.proxy()
    kubelet = rig.kubelet()
    pod, config = rig.run_pod(kubelet, "ignored", annotations=gpu_annotation(2, 3))
    container = kubelet.run_container(pod, config, "main")
    assert "NVIDIA_VISIBLE_DEVICES" not in kubelet.env(container)
    warnings = [r for r in caplog.records if r.message == "Runtime hook failed; going on without it"]
    assert {r.hook for r in warnings} >= {"PreRunPodSandbox", "PreCreateContainer", "PreStartContainer"}
    assert all(r.endpoint == str(down) and r.pod == "default/ignored" for r in warnings)


def test_hook_server_down_under_fail_fails_create_container_clearly(rig: Rig) -> None:
    down = rig.workdir / "agent-down.sock"
    rig.register(down, policy="Fail", hooks=["PreCreateContainer"])
    rig.proxy()
    kubelet = rig.kubelet()
    pod, config = rig.run_pod(kubelet, "failing", annotations=gpu_annotation(2, 3))
    with pytest.raises(grpc.RpcError) as info:
        kubelet.create_container(pod, kubelet.container_config("main"), config)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    details = info.value.details()
    assert details.startswith(f"pod default/failing: runtime hook PreCreateContainer at {down}: UNAVAILABLE: ")
    assert details.endswith("(failure-policy Fail)")
    assert not rig.direct.runtime.ListContainers(cri.ListContainersRequest()).containers


def test_rejected_run_pod_sandbox_leaves_no_sandbox(rig: Rig) -> None:
    rig.register(rig.workdir / "agent-down.sock", policy="Fail", hooks=["PreRunPodSandbox"])
    rig.proxy()
    kubelet = rig.kubelet()
    with pytest.raises(grpc.RpcError) as info:
        rig.run_pod(kubelet, "never")
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "runtime hook PreRunPodSandbox" in info.value.details()
    assert not rig.direct.runtime.ListPodSandbox(cri.ListPodSandboxRequest()).items


def test_malformed_annotation_under_fail_is_reported_to_kubelet(rig: Rig) -> None:
    rig.hook_server(GPUEnvPlugin())
    rig.proxy()
    kubelet = rig.kubelet()
    pod, config = rig.run_pod(kubelet, "bad", annotations={names.ANNOTATION_DEVICE_ALLOCATED: '{"gpu": 3}'})
    with pytest.raises(grpc.RpcError) as info:
        kubelet.create_container(pod, kubelet.container_config("main"), config)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "INVALID_ARGUMENT: gpu-env: pod default/bad: annotation scheduling.koordinator.sh/device-allocated: " in (
        info.value.details()
    )


def test_shared_gpu_limits_reach_the_container(rig: Rig) -> None:
    rig.hook_server(GPUEnvPlugin())
    rig.proxy()
    kubelet = rig.kubelet()
    share = {names.GPU_CORE: "30", names.GPU_MEMORY: "12Gi", names.GPU_MEMORY_RATIO: "30"}
    annotation = {names.ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": [{"minor": 1, "resources": share}]})}
    pod, config = rig.run_pod(kubelet, "shared", annotations=annotation)
    env = kubelet.env(kubelet.run_container(pod, config, "main"))
    assert (env["NVIDIA_VISIBLE_DEVICES"], env["CUDA_DEVICE_MEMORY_LIMIT_0"], env["CUDA_DEVICE_SM_LIMIT"]) == (
        "1",
        str(12 * 2**30),
        "30",
    )


@pytest.fixture
def rdma_node(rig: Rig) -> RDMADevicesPlugin:
    """A sysfs fixture with one RDMA PF, and real character device nodes standing in for /dev/infiniband."""
    sysfs, dev = rig.workdir / "sys", rig.workdir / "dev"
    (sysfs / "bus/pci/devices/0000:3b:00.0/infiniband_verbs/uverbs0").mkdir(parents=True)
    (dev / "infiniband").mkdir(parents=True)
    for name, major, minor in (("rdma_cm", 10, 58), ("uverbs0", 231, 192)):
        os.mknod(dev / "infiniband" / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    return RDMADevicesPlugin(sysfs_root=sysfs, dev_root=dev)


def test_rdma_device_nodes_are_in_the_container(rig: Rig, rdma_node: RDMADevicesPlugin) -> None:
    rig.hook_server(GPUEnvPlugin(), rdma_node)
    rig.proxy()
    kubelet = rig.kubelet()
    allocated = {"gpu": [{"minor": 0}], "rdma": [{"minor": 0, "id": "0000:3b:00.0"}]}
    pod, config = rig.run_pod(kubelet, "mpi", annotations={names.ANNOTATION_DEVICE_ALLOCATED: json.dumps(allocated)})
    container = kubelet.run_container(pod, config, "main")
    is_char_device = "test -c /dev/infiniband/rdma_cm && test -c /dev/infiniband/uverbs0"
    check = kubelet.exec_sync(container, ["sh", "-c", is_char_device])
    assert check.exit_code == 0, check.stderr
    assert kubelet.exec_sync(container, ["ls", "/dev/infiniband"]).stdout.split() == ["rdma_cm", "uverbs0"]


class CpuShares(HookPlugin):
    """Sets cpu.shares on create, and doubles what an update asks for."""

    name = "cpu-shares"

    def pre_create_container(
        self, request: hook.ContainerResourceHookRequest, response: hook.ContainerResourceHookResponse
    ) -> None:
        response.container_resources.cpu_shares = 512

    def pre_update_container_resources(
        self, request: hook.ContainerResourceHookRequest, response: hook.ContainerResourceHookResponse
    ) -> None:
        response.container_resources.cpu_shares = request.container_resources.cpu_shares * 2


def test_resources_from_hooks_reach_the_cgroup(rig: Rig) -> None:
    if not Path("/sys/fs/cgroup/cpu/cpu.shares").exists():
        pytest.skip("needs the cgroup v1 cpu controller at /sys/fs/cgroup/cpu")
    rig.hook_server(CpuShares())
    rig.proxy()
    kubelet = rig.kubelet()
    pod, config = rig.run_pod(kubelet, "qos")
    container = kubelet.run_container(pod, config, "main")
    shares = ["cat", "/sys/fs/cgroup/cpu/cpu.shares"]
    assert kubelet.exec_sync(container, shares).stdout.strip() == "512"
    update = cri.UpdateContainerResourcesRequest(
        container_id=container, linux=cri.LinuxContainerResources(cpu_shares=300)
    )
    kubelet.runtime.UpdateContainerResources(update, timeout=30)
    assert kubelet.exec_sync(container, shares).stdout.strip() == "600"
