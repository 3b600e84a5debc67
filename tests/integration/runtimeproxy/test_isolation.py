"""GPU isolation by HAMi-core through the proxy, on real containerd + runc: what a container sees.

The library is a stand-in file (no GPU here, and nothing in the container loads it: busybox is
static, so `LD_PRELOAD` is inert); what is checked is Koordinator's contract — the variables, the
preload and the mounts — as the container sees it, not HAMi-core's enforcement.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import grpc
import pytest
from cri_api.v1 import api_pb2 as cri

from agent.hooks import GPUEnvPlugin
from agent.hooks.hamicore import HAMiCore
from apis.extension import names
from tests.integration.runtimeproxy.rig import Rig

pytestmark = [pytest.mark.integration, pytest.mark.root]

GI = 2**30
HAMI = {names.LABEL_GPU_ISOLATION_PROVIDER: names.GPU_ISOLATION_PROVIDER_HAMI_CORE}
STAND_IN = "hami-core stand-in\n"


def shared_gpu(minor: int, *, core: int, memory_gi: int, ratio: int) -> dict[str, str]:
    resources = {names.GPU_CORE: str(core), names.GPU_MEMORY: f"{memory_gi}Gi", names.GPU_MEMORY_RATIO: str(ratio)}
    return {names.ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": [{"minor": minor, "resources": resources}]})}


@pytest.fixture
def hami_core(rig: Rig) -> HAMiCore:
    """The node's HAMi-core: a library file where the agent is told it is, and a lock directory."""
    library = rig.workdir / "vgpu" / "libvgpu.so"
    library.parent.mkdir()
    library.write_text(STAND_IN)
    return HAMiCore(library=library, lock_dir=rig.workdir / "vgpulock")


def mount_points(rig: Rig, container: str) -> set[str]:
    mounts = rig.direct.exec_sync(container, ["cat", "/proc/self/mounts"]).stdout
    return {line.split()[1] for line in mounts.splitlines()}


def test_hami_core_pod_gets_koordinators_env_preload_and_mounts(rig: Rig, hami_core: HAMiCore) -> None:
    rig.hook_server(GPUEnvPlugin(hami_core))
    rig.proxy()
    kubelet = rig.kubelet()
    pod, config = rig.run_pod(kubelet, "infer", annotations=shared_gpu(1, core=30, memory_gi=12, ratio=30), labels=HAMI)
    container = kubelet.run_container(pod, config, "main", envs={"APP": "infer"})
    env = kubelet.env(container)
    library = str(hami_core.library)
    hami_env = {k: env.get(k) for k in ("NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_SM_LIMIT")}
    assert hami_env == {
        "NVIDIA_VISIBLE_DEVICES": "1",
        "CUDA_DEVICE_MEMORY_LIMIT": str(12 * GI),
        "CUDA_DEVICE_SM_LIMIT": "30",
    }
    assert (env["LD_PRELOAD"], env["CUDA_DEVICE_MEMORY_LIMIT_0"], env["APP"]) == (library, str(12 * GI), "infer")
    assert "CUDA_DEVICE_MEMORY_SHARED_CACHE" not in env  # the vGPU monitor is off by default
    # The library is bind-mounted at the path LD_PRELOAD names, and HAMi-core's lock directory
    # is the host's, shared by every container on the node.
    assert {library, "/tmp/vgpulock"} <= mount_points(rig, container)
    assert kubelet.exec_sync(container, ["cat", library]).stdout == STAND_IN
    wrote = kubelet.exec_sync(container, ["sh", "-c", "echo held > /tmp/vgpulock/lock.1"])
    assert wrote.exit_code == 0, wrote.stderr
    assert (hami_core.lock_dir / "lock.1").read_text() == "held\n"


def test_shared_pod_without_the_label_gets_no_preload_and_no_mounts(rig: Rig, hami_core: HAMiCore) -> None:
    rig.hook_server(GPUEnvPlugin(hami_core))
    rig.proxy()
    kubelet = rig.kubelet()
    pod, config = rig.run_pod(kubelet, "plain-share", annotations=shared_gpu(1, core=30, memory_gi=12, ratio=30))
    container = kubelet.run_container(pod, config, "main")
    env = kubelet.env(container)
    assert "LD_PRELOAD" not in env
    assert "CUDA_DEVICE_MEMORY_LIMIT" not in env
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == str(12 * GI)  # the share is still stated
    assert not {str(hami_core.library), "/tmp/vgpulock"} & mount_points(rig, container)
    assert kubelet.exec_sync(container, ["test", "-e", str(hami_core.library)]).exit_code != 0


def test_vgpu_monitor_cache_is_the_containers_own_directory(rig: Rig, hami_core: HAMiCore) -> None:
    rig.hook_server(GPUEnvPlugin(dataclasses.replace(hami_core, vgpu_monitor=True)))
    rig.proxy()
    kubelet = rig.kubelet()
    config = kubelet.pod_config(
        "monitored", uid="uid-42", labels=HAMI, annotations=shared_gpu(0, core=50, memory_gi=8, ratio=50)
    )
    pod = kubelet.run_pod(config)
    container = kubelet.run_container(pod, config, "main")
    directory = hami_core.library.parent
    cache = kubelet.env(container)["CUDA_DEVICE_MEMORY_SHARED_CACHE"]
    assert cache == f"{directory}/uid-42_main.cache"
    # Inside, the library's directory is the container's cache directory, with the library
    # mounted over it (the runtime mounts the shallower path first).
    assert kubelet.exec_sync(container, ["cat", str(hami_core.library)]).stdout == STAND_IN
    wrote = kubelet.exec_sync(container, ["sh", "-c", f"echo accounted > {cache}"])
    assert wrote.exit_code == 0, wrote.stderr
    assert (directory / "containers" / "uid-42_main" / "uid-42_main.cache").read_text() == "accounted\n"


def test_hami_core_pod_is_refused_on_a_node_without_the_library(rig: Rig, tmp_path: Path) -> None:
    missing = HAMiCore(library=rig.workdir / "not-installed" / "libvgpu.so", lock_dir=rig.workdir / "vgpulock")
    rig.hook_server(GPUEnvPlugin(missing))
    rig.proxy()
    kubelet = rig.kubelet()
    pod, config = rig.run_pod(
        kubelet, "nowhere", annotations=shared_gpu(1, core=30, memory_gi=12, ratio=30), labels=HAMI
    )
    with pytest.raises(grpc.RpcError) as info:
        kubelet.create_container(pod, kubelet.container_config("main"), config)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"its library {missing.library} is not on this node" in info.value.details()
    assert not rig.direct.runtime.ListContainers(cri.ListContainersRequest()).containers
    assert not missing.library.parent.exists()  # nothing made up in its place
