"""GPU env hook over real gRPC on a unix socket: what a container is told about its GPUs."""

from __future__ import annotations

import dataclasses
import stat
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from agent.hooks import GPUEnvPlugin
from agent.hooks.gpu import ENV_SM_LIMIT, ENV_VISIBLE_DEVICES
from agent.hooks.hamicore import HAMiCore
from apis.extension import names
from proto.runtime.v1alpha1 import api_pb2, api_pb2_grpc

GI = 2**30
Serve = Callable[..., api_pb2_grpc.RuntimeHookServiceStub]
MakeRequest = Callable[..., api_pb2.ContainerResourceHookRequest]


def whole(minor: int) -> dict[str, object]:
    return {"minor": minor, "resources": {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100"}, "id": f"GPU-{minor}"}


def test_whole_gpus_become_visible_devices(serve: Serve, container_request: MakeRequest) -> None:
    stub = serve(GPUEnvPlugin())
    response = stub.PreCreateContainerHook(container_request({"gpu": [whole(2), whole(3)]}))
    assert dict(response.container_envs) == {ENV_VISIBLE_DEVICES: "2,3"}


def test_allocation_order_is_kept(serve: Serve, container_request: MakeRequest) -> None:
    # The order decides which GPU is CUDA device 0 inside the container.
    stub = serve(GPUEnvPlugin())
    response = stub.PreCreateContainerHook(container_request({"gpu": [whole(5), whole(1)]}))
    assert response.container_envs[ENV_VISIBLE_DEVICES] == "5,1"


@pytest.mark.parametrize(
    "names_of",
    [
        (names.GPU_CORE, names.GPU_MEMORY, names.GPU_MEMORY_RATIO),
        # As Koordinator before v1.2 wrote the annotation: the share and the envs are the same.
        (names.DEPRECATED_GPU_CORE, names.DEPRECATED_GPU_MEMORY, names.DEPRECATED_GPU_MEMORY_RATIO),
    ],
    ids=["current-names", "deprecated-names"],
)
def test_shared_gpu_states_its_share_for_hami_core(
    serve: Serve, container_request: MakeRequest, names_of: tuple[str, str, str]
) -> None:
    core, memory, ratio = names_of
    share = {core: "50", memory: "40Gi", ratio: "50"}
    stub = serve(GPUEnvPlugin())
    response = stub.PreCreateContainerHook(container_request({"gpu": [{"minor": 3, "resources": share}]}))
    assert dict(response.container_envs) == {
        ENV_VISIBLE_DEVICES: "3",
        "CUDA_DEVICE_MEMORY_LIMIT_0": str(40 * GI),
        ENV_SM_LIMIT: "50",
    }


def test_shared_over_several_gpus_limits_each(serve: Serve, container_request: MakeRequest) -> None:
    share = {names.GPU_CORE: "25", names.GPU_MEMORY: "8Gi", names.GPU_MEMORY_RATIO: "25"}
    stub = serve(GPUEnvPlugin())
    allocated = {"gpu": [{"minor": 0, "resources": share}, {"minor": 1, "resources": share}]}
    envs = dict(stub.PreCreateContainerHook(container_request(allocated)).container_envs)
    assert envs[ENV_VISIBLE_DEVICES] == "0,1"
    assert envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == envs["CUDA_DEVICE_MEMORY_LIMIT_1"] == str(8 * GI)
    assert envs[ENV_SM_LIMIT] == "25"


def test_memory_only_share_has_no_sm_limit(serve: Serve, container_request: MakeRequest) -> None:
    share = {names.GPU_MEMORY: "4Gi", names.GPU_MEMORY_RATIO: "10"}
    stub = serve(GPUEnvPlugin())
    envs = dict(
        stub.PreCreateContainerHook(container_request({"gpu": [{"minor": 7, "resources": share}]})).container_envs
    )
    assert envs == {ENV_VISIBLE_DEVICES: "7", "CUDA_DEVICE_MEMORY_LIMIT_0": str(4 * GI)}


@pytest.mark.parametrize(
    "allocated",
    [None, {}, {"rdma": [{"minor": 0, "id": "0000:3b:00.0"}]}, {"gpu": []}],
    ids=["no-annotation", "empty-object", "rdma-only", "no-gpus"],
)
def test_pods_without_gpus_are_left_alone(serve: Serve, container_request: MakeRequest, allocated: object) -> None:
    stub = serve(GPUEnvPlugin())
    assert stub.PreCreateContainerHook(container_request(allocated)) == api_pb2.ContainerResourceHookResponse()


def test_other_hooks_do_nothing(serve: Serve, container_request: MakeRequest) -> None:
    stub = serve(GPUEnvPlugin())
    request = container_request({"gpu": [whole(2)]})
    assert stub.PreStartContainerHook(request) == api_pb2.ContainerResourceHookResponse()
    assert stub.PreUpdateContainerResourcesHook(request) == api_pb2.ContainerResourceHookResponse()


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"gpu": {"minor": 1}}', "gpu: expected a list of allocations"),
        ('{"gpu": [{"minor": -1}]}', "gpu[0].minor: expected a non-negative integer"),
        ('{"gpu": [{"minor": 1}, {"minor": 1}]}', "the same minor is listed twice"),
        ('{"gpu": [{"minor": 1, "resources": {"koordinator.sh/gpu-core": "lots"}}]}', "gpu[0].resources"),
    ],
    ids=["not-json", "not-object", "not-list", "negative-minor", "duplicate-minor", "bad-quantity"],
)
def test_malformed_annotation_is_a_clear_error_and_the_server_keeps_serving(
    serve: Serve, container_request: MakeRequest, raw: str, reason: str
) -> None:
    stub = serve(GPUEnvPlugin())
    with pytest.raises(grpc.RpcError) as info:
        stub.PreCreateContainerHook(container_request(raw_annotation=raw, namespace="ml", name="job-1"))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = info.value.details()
    assert details.startswith("gpu-env: pod ml/job-1: annotation scheduling.koordinator.sh/device-allocated: ")
    assert reason in details
    # The next pod is served as usual.
    assert (
        stub.PreCreateContainerHook(container_request({"gpu": [whole(1)]})).container_envs[ENV_VISIBLE_DEVICES] == "1"
    )


def test_shared_gpu_without_memory_bytes_is_rejected(serve: Serve, container_request: MakeRequest) -> None:
    stub = serve(GPUEnvPlugin())
    share = {names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}
    with pytest.raises(grpc.RpcError) as info:
        stub.PreCreateContainerHook(container_request({"gpu": [{"minor": 3, "resources": share}]}))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "shared GPU 3 has no koordinator.sh/gpu-memory" in info.value.details()


# --- HAMi-core isolation (Koordinator's GPU hook) ---------------------------------------------------
HAMI = {names.LABEL_GPU_ISOLATION_PROVIDER: names.GPU_ISOLATION_PROVIDER_HAMI_CORE}


@pytest.fixture
def hami_core(tmp_path: Path) -> HAMiCore:
    """A node with the library installed (a stand-in file: nothing loads it here) and no lock dir yet."""
    library = tmp_path / "vgpu" / "libvgpu.so"
    library.parent.mkdir()
    library.write_bytes(b"\x7fELF stand-in")
    return HAMiCore(library=library, lock_dir=tmp_path / "vgpulock")


def share(core: int | None, memory: str, ratio: int) -> dict[str, str]:
    out = {names.GPU_MEMORY: memory, names.GPU_MEMORY_RATIO: str(ratio)}
    if core is not None:
        out[names.GPU_CORE] = str(core)
    return out


def mounts_of(response: api_pb2.ContainerResourceHookResponse) -> list[tuple[str, str, str, list[str]]]:
    return [(m.source, m.destination, m.type, list(m.options)) for m in response.container_mounts]


def test_hami_core_pod_gets_koordinators_env_preload_and_mounts(
    serve: Serve, container_request: MakeRequest, hami_core: HAMiCore
) -> None:
    stub = serve(GPUEnvPlugin(hami_core))
    allocated = {"gpu": [{"minor": 3, "resources": share(50, "40Gi", 50)}]}
    response = stub.PreCreateContainerHook(container_request(allocated, labels=HAMI))
    library = str(hami_core.library)
    assert dict(response.container_envs) == {
        ENV_VISIBLE_DEVICES: "3",
        "CUDA_DEVICE_MEMORY_LIMIT": str(40 * GI),
        "CUDA_DEVICE_SM_LIMIT": "50",
        "LD_PRELOAD": library,
        "CUDA_DEVICE_MEMORY_LIMIT_0": str(40 * GI),
    }
    assert mounts_of(response) == [
        (library, library, "bind", ["rbind"]),
        (str(hami_core.lock_dir), "/tmp/vgpulock", "bind", ["rbind"]),
    ]
    # HAMi-core's lock directory exists on the host, writable by any container user.
    assert stat.S_IMODE(hami_core.lock_dir.stat().st_mode) == 0o777


def test_hami_core_limits_each_gpu_to_its_own_share(
    serve: Serve, container_request: MakeRequest, hami_core: HAMiCore
) -> None:
    # Koordinator's one CUDA_DEVICE_MEMORY_LIMIT is the first GPU's; the per-GPU ones win in HAMi-core.
    stub = serve(GPUEnvPlugin(hami_core))
    allocated = {
        "gpu": [{"minor": 0, "resources": share(25, "10Gi", 25)}, {"minor": 1, "resources": share(25, "20Gi", 25)}]
    }
    envs = dict(stub.PreCreateContainerHook(container_request(allocated, labels=HAMI)).container_envs)
    assert (
        envs["CUDA_DEVICE_MEMORY_LIMIT"],
        envs["CUDA_DEVICE_MEMORY_LIMIT_0"],
        envs["CUDA_DEVICE_MEMORY_LIMIT_1"],
    ) == (
        str(10 * GI),
        str(10 * GI),
        str(20 * GI),
    )


def test_hami_core_memory_only_share_has_no_sm_limit(
    serve: Serve, container_request: MakeRequest, hami_core: HAMiCore
) -> None:
    stub = serve(GPUEnvPlugin(hami_core))
    allocated = {"gpu": [{"minor": 7, "resources": share(None, "4Gi", 10)}]}
    envs = dict(stub.PreCreateContainerHook(container_request(allocated, labels=HAMI)).container_envs)
    assert "CUDA_DEVICE_SM_LIMIT" not in envs
    assert envs["LD_PRELOAD"] == str(hami_core.library)


@pytest.mark.parametrize(
    "resources",
    [share(100, "80Gi", 100), share(50, "80Gi", 100)],
    ids=["whole-gpu", "compute-share-of-whole-memory"],
)
def test_hami_core_pod_with_the_whole_memory_of_its_gpu_is_not_isolated(
    serve: Serve, container_request: MakeRequest, hami_core: HAMiCore, resources: dict[str, str]
) -> None:
    # Koordinator's condition: the first GPU's gpu-memory-ratio below 100.
    stub = serve(GPUEnvPlugin(hami_core))
    response = stub.PreCreateContainerHook(
        container_request({"gpu": [{"minor": 2, "resources": resources}]}, labels=HAMI)
    )
    assert dict(response.container_envs) == {ENV_VISIBLE_DEVICES: "2"}
    assert not response.container_mounts
    assert not hami_core.lock_dir.exists()


@pytest.mark.parametrize(
    "labels",
    [{}, {names.LABEL_GPU_ISOLATION_PROVIDER: "hami-core"}, {names.LABEL_GPU_ISOLATION_PROVIDER: "other"}],
    ids=["unlabelled", "wrong-case", "other-provider"],
)
def test_shared_pod_without_the_hami_core_label_gets_no_preload(
    serve: Serve, container_request: MakeRequest, hami_core: HAMiCore, labels: dict[str, str]
) -> None:
    stub = serve(GPUEnvPlugin(hami_core))
    response = stub.PreCreateContainerHook(
        container_request({"gpu": [{"minor": 3, "resources": share(50, "40Gi", 50)}]}, labels=labels)
    )
    assert dict(response.container_envs) == {
        ENV_VISIBLE_DEVICES: "3",
        "CUDA_DEVICE_MEMORY_LIMIT_0": str(40 * GI),
        ENV_SM_LIMIT: "50",
    }
    assert not response.container_mounts


def test_hami_core_pod_is_refused_where_the_library_is_missing(
    serve: Serve, container_request: MakeRequest, tmp_path: Path
) -> None:
    absent = HAMiCore(library=tmp_path / "nowhere" / "libvgpu.so", lock_dir=tmp_path / "vgpulock")
    stub = serve(GPUEnvPlugin(absent))
    allocated = {"gpu": [{"minor": 3, "resources": share(50, "40Gi", 50)}]}
    with pytest.raises(grpc.RpcError) as info:
        stub.PreCreateContainerHook(container_request(allocated, labels=HAMI, namespace="ml", name="infer-0"))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert info.value.details() == (
        f"gpu-env: pod ml/infer-0: asks for GPU isolation by HAMi-core, but its library {absent.library} is not "
        "on this node (agent flag --hami-core-library-directory-path); its GPU share would not be enforced"
    )


@pytest.mark.parametrize(
    ("resources", "missing"),
    [
        ({names.GPU_CORE: "50", names.GPU_MEMORY: "40Gi"}, names.GPU_MEMORY_RATIO),
        ({names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}, names.GPU_MEMORY),
    ],
    ids=["no-ratio", "no-bytes"],
)
def test_hami_core_pod_whose_allocation_lacks_what_koordinator_needs_is_an_error(
    serve: Serve, container_request: MakeRequest, hami_core: HAMiCore, resources: dict[str, str], missing: str
) -> None:
    stub = serve(GPUEnvPlugin(hami_core))
    with pytest.raises(grpc.RpcError) as info:
        stub.PreCreateContainerHook(container_request({"gpu": [{"minor": 3, "resources": resources}]}, labels=HAMI))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"GPU 3 has no {missing}, which HAMi-core isolation needs" in info.value.details()


def test_vgpu_monitor_gives_each_container_a_fresh_cache_directory(
    serve: Serve, container_request: MakeRequest, hami_core: HAMiCore
) -> None:
    monitored = dataclasses.replace(hami_core, vgpu_monitor=True)
    directory = hami_core.library.parent
    stale = directory / "containers" / "uid-7_main" / "old.cache"
    stale.parent.mkdir(parents=True)
    stale.write_text("from the container's last run")
    stub = serve(GPUEnvPlugin(monitored))
    allocated = {"gpu": [{"minor": 1, "resources": share(30, "12Gi", 30)}]}
    response = stub.PreCreateContainerHook(container_request(allocated, labels=HAMI, uid="uid-7", container="main"))
    assert response.container_envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] == f"{directory}/uid-7_main.cache"
    host_dir = directory / "containers" / "uid-7_main"
    assert mounts_of(response)[-1] == (str(host_dir), str(directory), "bind", ["rbind"])
    assert list(host_dir.iterdir()) == []
    assert stat.S_IMODE(host_dir.stat().st_mode) == 0o777


def test_vgpu_monitor_refuses_a_uid_that_is_not_a_file_name(
    serve: Serve, container_request: MakeRequest, hami_core: HAMiCore
) -> None:
    stub = serve(GPUEnvPlugin(dataclasses.replace(hami_core, vgpu_monitor=True)))
    allocated = {"gpu": [{"minor": 1, "resources": share(30, "12Gi", 30)}]}
    with pytest.raises(grpc.RpcError) as info:
        stub.PreCreateContainerHook(container_request(allocated, labels=HAMI, uid="../../etc"))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "uid '../../etc' cannot name a vGPU monitor cache file" in info.value.details()
    assert not (hami_core.library.parent / "containers").exists()
