"""GPU env hook over real gRPC on a unix socket: what a container is told about its GPUs."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest

from agent.hooks import GPUEnvPlugin
from agent.hooks.gpu import ENV_SM_LIMIT, ENV_VISIBLE_DEVICES
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
