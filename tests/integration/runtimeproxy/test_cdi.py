"""CDI through real containerd 1.6 + runc: the proxy applies a container's CDI devices, which
this containerd ignores, from the spec the agent's DRA plugin writes for a prepared claim."""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path

import grpc
import pytest

from agent.dra.cdi import CDIDir, device_id, spec_for
from agent.dra.prepared import PreparedClaim, PreparedDevice
from agent.hooks.hamicore import HAMiCore
from tests.integration.runtimeproxy.rig import Rig

pytestmark = [pytest.mark.integration, pytest.mark.root]

GiB = 1024**3


def half_gpu_spec(directory: Path, dev_root: Path) -> str:
    """A prepared claim holding half of GPU 0, its spec written as the agent writes it; its CDI name."""
    uid = str(uuid.uuid4())
    device = PreparedDevice(
        "gpu", "node-a", "gpu-0", 0, share_id=str(uuid.uuid4()), cores=50, memory=40 * GiB, total_memory=80 * GiB
    )
    claim = PreparedClaim(uid, "default", "half", (device,))
    CDIDir(directory).write(uid, spec_for(claim, dev_root=dev_root, hami_core=HAMiCore()))
    return device_id(uid, "gpu-0")


def fake_device_nodes(dev_root: Path) -> None:
    """Character devices with /dev/null's numbers where the spec says the GPU's nodes are."""
    dev_root.mkdir()
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm"):
        os.mknod(dev_root / name, stat.S_IFCHR | 0o666, os.makedev(1, 3))


def test_the_container_sees_exactly_its_gpu_and_limits_via_cdi(rig: Rig, tmp_path: Path) -> None:
    dev_root = tmp_path / "dev"
    fake_device_nodes(dev_root)
    name = half_gpu_spec(tmp_path / "cdi", dev_root)
    rig.proxy(apply_cdi=True, cdi_spec_dirs=(tmp_path / "cdi",))
    kubelet = rig.kubelet()
    pod, sandbox = rig.run_pod(kubelet, "dra-pod")
    config = kubelet.container_config("main")
    config.CDI_devices.add(name=name)
    container = kubelet.create_container(pod, config, sandbox)
    kubelet.start_container(container)
    env = kubelet.env(container)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "0"
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == str(40 * GiB)
    assert env["CUDA_DEVICE_SM_LIMIT"] == "50"
    listing = kubelet.exec_sync(container, ["ls", "/dev"]).stdout.split()
    assert {"nvidia0", "nvidiactl", "nvidia-uvm"} <= set(listing)
    assert "nvidia1" not in listing


def test_an_unknown_cdi_device_fails_the_create_with_the_reason(rig: Rig, tmp_path: Path) -> None:
    rig.proxy(apply_cdi=True, cdi_spec_dirs=(tmp_path / "cdi",))
    kubelet = rig.kubelet()
    pod, sandbox = rig.run_pod(kubelet, "dra-missing")
    config = kubelet.container_config("main")
    config.CDI_devices.add(name="gpu.tessera.dev/claim=gone-gpu-0")
    with pytest.raises(grpc.RpcError) as refused:
        kubelet.create_container(pod, config, sandbox)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "gpu.tessera.dev/claim=gone-gpu-0" in str(refused.value.details())
    assert "is not in any spec of" in str(refused.value.details())


def test_without_apply_cdi_the_devices_are_left_to_the_runtime(rig: Rig, tmp_path: Path) -> None:
    dev_root = tmp_path / "dev"
    fake_device_nodes(dev_root)
    name = half_gpu_spec(tmp_path / "cdi", dev_root)
    rig.proxy()
    kubelet = rig.kubelet()
    pod, sandbox = rig.run_pod(kubelet, "dra-off")
    config = kubelet.container_config("main")
    config.CDI_devices.add(name=name)
    container = kubelet.create_container(pod, config, sandbox)
    kubelet.start_container(container)
    # containerd 1.6 ignores the field: this is what --apply-cdi is for.
    assert "NVIDIA_VISIBLE_DEVICES" not in kubelet.env(container)
