"""The hook server: plugin composition, error answers, the socket, and wire compatibility."""

from __future__ import annotations

import socket
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from agent.hooks import HookError, HookPlugin, HookServer
from agent.hooks.plugin import HookRefused
from agent.hooks.service import HOOKS, SERVICE
from apis.errors import ConfigError
from proto.runtime.v1alpha1 import api_pb2, api_pb2_grpc

Serve = Callable[..., api_pb2_grpc.RuntimeHookServiceStub]
MakeRequest = Callable[..., api_pb2.ContainerResourceHookRequest]


class SetEnv(HookPlugin):
    """Sets one env var, and records what the response held when it ran."""

    def __init__(self, key: str, value: str) -> None:
        self.name = f"set-{key}"
        self.key, self.value = key, value
        self.seen: list[dict[str, str]] = []

    def pre_create_container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        self.seen.append(dict(response.container_envs))
        response.container_envs[self.key] = self.value


class Rejects(HookPlugin):
    name = "rejects"

    def pre_create_container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        raise HookError("pod default/train-0: no can do")


class Crashes(HookPlugin):
    name = "crashes"

    def pre_run_pod_sandbox(
        self, request: api_pb2.PodSandboxHookRequest, response: api_pb2.PodSandboxHookResponse
    ) -> None:
        raise KeyError("bug")


def test_every_rpc_of_the_service_has_a_plugin_method() -> None:
    assert {m.name for m in SERVICE.methods} == set(HOOKS)
    assert all(callable(getattr(HookPlugin, method)) for method in HOOKS.values())


def test_plugins_run_in_order_on_one_response(serve: Serve, container_request: MakeRequest) -> None:
    first, second = SetEnv("A", "1"), SetEnv("A", "2")
    stub = serve(first, second, SetEnv("B", "3"))
    response = stub.PreCreateContainerHook(container_request())
    assert dict(response.container_envs) == {"A": "2", "B": "3"}
    assert second.seen == [{"A": "1"}]


def test_hook_error_names_the_plugin(serve: Serve, container_request: MakeRequest) -> None:
    stub = serve(SetEnv("A", "1"), Rejects())
    with pytest.raises(grpc.RpcError) as info:
        stub.PreCreateContainerHook(container_request())
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == "rejects: pod default/train-0: no can do"


def test_a_plugin_bug_is_internal_and_logged_and_the_server_keeps_serving(
    serve: Serve, container_request: MakeRequest, caplog: pytest.LogCaptureFixture
) -> None:
    stub = serve(Crashes(), SetEnv("A", "1"))
    with pytest.raises(grpc.RpcError) as info:
        stub.PreRunPodSandboxHook(api_pb2.PodSandboxHookRequest())
    assert info.value.code() == grpc.StatusCode.INTERNAL
    assert "crashes: internal error" in info.value.details()
    assert any(r.message == "Hook plugin failed" and r.exc_info for r in caplog.records)
    assert stub.PreCreateContainerHook(container_request()).container_envs["A"] == "1"


def test_every_hook_answers_with_no_plugins(serve: Serve, container_request: MakeRequest) -> None:
    stub = serve()
    for rpc in HOOKS:
        request = api_pb2.PodSandboxHookRequest() if "PodSandbox" in rpc else container_request()
        assert getattr(stub, rpc)(request).ByteSize() == 0


def test_socket_is_private_and_removed_on_stop(sock_dir: Path) -> None:
    path = sock_dir / "run" / "agent.sock"
    server = HookServer([], socket_path=path)
    server.start()
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_ISSOCK(path.stat().st_mode)
    finally:
        server.stop()
    assert not path.exists()
    server.stop()  # idempotent


def test_stale_socket_is_replaced(sock_dir: Path, container_request: MakeRequest) -> None:
    path = sock_dir / "agent.sock"
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(path))  # bound, never listening: what a crashed agent leaves
    with HookServer([SetEnv("A", "1")], socket_path=path) as server, grpc.insecure_channel(server.address) as channel:
        stub = api_pb2_grpc.RuntimeHookServiceStub(channel)
        assert stub.PreCreateContainerHook(container_request()).container_envs["A"] == "1"


def test_live_socket_is_not_taken_over(sock_dir: Path) -> None:
    path = sock_dir / "agent.sock"
    with HookServer([], socket_path=path), pytest.raises(ConfigError, match="already serving"):
        HookServer([], socket_path=path).start()


def test_non_socket_path_is_not_replaced(sock_dir: Path) -> None:
    path = sock_dir / "agent.sock"
    path.write_text("precious")
    with pytest.raises(ConfigError, match="not a unix socket"):
        HookServer([], socket_path=path).start()
    assert path.read_text() == "precious"


def test_concurrent_calls(serve: Serve, container_request: MakeRequest) -> None:
    stub = serve(SetEnv("A", "1"))
    results: list[str] = []

    def call() -> None:
        for _ in range(20):
            results.append(stub.PreCreateContainerHook(container_request()).container_envs["A"])

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["1"] * 80


def _koordinator_response_type() -> type:
    """ContainerResourceHookResponse as a peer without Tessera's extensions declares it."""
    file = descriptor_pb2.FileDescriptorProto()
    api_pb2.DESCRIPTOR.CopyToProto(file)
    for message in file.message_type:
        kept = [f for f in message.field if f.number < 100]
        del message.field[:]
        message.field.extend(kept)
    pool = descriptor_pool.DescriptorPool()  # its own pool: same names, no clash with ours
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("runtime.v1alpha1.ContainerResourceHookResponse"))


def test_extension_fields_use_numbers_from_100() -> None:
    extension = {f.name: f.number for f in api_pb2.ContainerResourceHookResponse.DESCRIPTOR.fields if f.number >= 100}
    assert extension == {"container_devices": 100, "container_mounts": 101}


def test_a_peer_without_the_extension_reads_the_rest() -> None:
    ours = api_pb2.ContainerResourceHookResponse(container_envs={"NVIDIA_VISIBLE_DEVICES": "2,3"})
    ours.container_devices.add(container_path="/dev/infiniband/uverbs0", host_path="/dev/infiniband/uverbs0")
    ours.container_mounts.add(destination="/tmp/vgpulock", type="bind", source="/tmp/vgpulock", options=["rbind"])
    theirs = _koordinator_response_type().FromString(ours.SerializeToString())
    assert dict(theirs.container_envs) == {"NVIDIA_VISIBLE_DEVICES": "2,3"}
    assert not hasattr(theirs, "container_devices")
    assert not hasattr(theirs, "container_mounts")


class RefusesAtLength(HookPlugin):
    """Refuses with a reason of `length` characters (a collision naming many pods and shares)."""

    name = "refuses"

    def __init__(self, length: int, char: str = "x") -> None:
        self.reason = ("pod default/train-0: " + char * length)[:length]

    def pre_create_container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        raise HookRefused(self.reason)


@pytest.mark.parametrize("char", ["x", "é"], ids=["ascii", "percent-encoded"])
def test_a_refusal_too_long_for_grpc_metadata_arrives_with_its_reason_cut(
    serve: Serve, container_request: MakeRequest, char: str
) -> None:
    # gRPC carries the message in a trailer, and a client refuses trailers over its metadata limit
    # (8 KiB by default) as RESOURCE_EXHAUSTED: the refusal must arrive as itself, shortened.
    stub = serve(RefusesAtLength(40_000, char))
    with pytest.raises(grpc.RpcError) as info:
        stub.PreCreateContainerHook(container_request())
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    details = info.value.details() or ""
    assert details.startswith(f"refuses: pod default/train-0: {char * 10}")
    assert details.endswith("bytes cut)")
    assert len(details.encode()) <= 4096
