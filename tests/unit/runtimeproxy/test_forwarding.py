"""How the proxy forwards, against a fake runtime on a real unix socket.

containerd 1.6 cannot show some of it (it implements no streaming CRI method, and sends no
fields newer than our stubs), so a small gRPC server stands in for the runtime here and records
what reaches it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from cri_api.v1 import api_pb2 as cri
from cri_api.v1 import api_pb2_grpc as cri_grpc

from runtimeproxy import ProxySettings, RuntimeProxy

RUNTIME = "/runtime.v1.RuntimeService/"
ECHO = "/tessera.test.Echo/Chat"  # a method no CRI version has, streaming both ways


class FakeRuntime(grpc.GenericRpcHandler):
    """Answers a few methods with raw bytes and records what it received."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, dict[str, str], float | None, bytes]] = []

    def _record(self, method: str, context: grpc.ServicerContext, payload: bytes) -> None:
        remaining = context.time_remaining()
        with self.lock:
            self.seen.append(
                (
                    method,
                    {m.key: m.value for m in context.invocation_metadata()},
                    remaining if remaining is not None and remaining < 1e6 else None,
                    payload,
                )
            )

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = details.method
        if method == RUNTIME + "Version":
            return grpc.unary_unary_rpc_method_handler(self._version)
        if method == RUNTIME + "CreateContainer":
            return grpc.unary_unary_rpc_method_handler(self._create)
        if method == RUNTIME + "ContainerStatus":
            return grpc.unary_unary_rpc_method_handler(self._not_found)
        if method == RUNTIME + "GetContainerEvents":
            return grpc.unary_stream_rpc_method_handler(self._events)
        if method == ECHO:
            return grpc.stream_stream_rpc_method_handler(self._echo)
        return None

    def _version(self, payload: bytes, context: grpc.ServicerContext) -> bytes:
        self._record("Version", context, payload)
        return cri.VersionResponse(runtime_name="fake", runtime_api_version="v1").SerializeToString()

    def _create(self, payload: bytes, context: grpc.ServicerContext) -> bytes:
        self._record("CreateContainer", context, payload)
        return cri.CreateContainerResponse(container_id="c-1").SerializeToString()

    def _not_found(self, payload: bytes, context: grpc.ServicerContext) -> bytes:
        context.abort(grpc.StatusCode.NOT_FOUND, 'container "x" not found')
        return b""

    def _events(self, payload: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        for index in range(3):
            yield cri.ContainerEventResponse(container_id=f"c-{index}").SerializeToString()

    def _echo(self, payloads: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        for payload in payloads:
            yield payload[::-1]


@pytest.fixture
def fake(sock_dir: Path) -> Iterator[FakeRuntime]:
    runtime = FakeRuntime()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[runtime])
    server.add_insecure_port(f"unix://{sock_dir / 'runtime.sock'}")
    server.start()
    yield runtime
    server.stop(None).wait()


@pytest.fixture
def channel(sock_dir: Path, fake: FakeRuntime) -> Iterator[grpc.Channel]:
    """A channel to a proxy in front of the fake runtime, with no hook servers registered."""
    settings = ProxySettings(
        listen=sock_dir / "proxy.sock",
        runtime_endpoint=str(sock_dir / "runtime.sock"),
        hook_config_dir=sock_dir / "no-hooks",
    )
    with RuntimeProxy(settings) as proxy, grpc.insecure_channel(proxy.address) as client:
        yield client


def test_metadata_and_deadline_travel_on(channel: grpc.Channel, fake: FakeRuntime) -> None:
    version = cri_grpc.RuntimeServiceStub(channel).Version
    assert version(cri.VersionRequest(), timeout=5, metadata=[("x-request-id", "42")]).runtime_name == "fake"
    version(cri.VersionRequest())
    (_, metadata, remaining, _), (_, _, no_deadline, _) = fake.seen
    assert metadata["x-request-id"] == "42"
    assert remaining is not None and 1 < remaining < 6  # gRPC rounds deadlines on the wire
    assert no_deadline is None


def test_server_streaming_is_relayed(channel: grpc.Channel) -> None:
    events = cri_grpc.RuntimeServiceStub(channel).GetContainerEvents(cri.GetEventsRequest(), timeout=5)
    assert [e.container_id for e in events] == ["c-0", "c-1", "c-2"]


def test_unknown_bidirectional_method_is_relayed(channel: grpc.Channel) -> None:
    chat: Callable[..., Iterator[bytes]] = channel.stream_stream(ECHO)
    assert list(chat(iter([b"abc", b"xy"]), timeout=5)) == [b"cba", b"yx"]


def test_errors_keep_code_and_message(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as info:
        cri_grpc.RuntimeServiceStub(channel).ContainerStatus(cri.ContainerStatusRequest(container_id="x"), timeout=5)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert info.value.details() == 'container "x" not found'


def test_method_the_runtime_lacks_is_unimplemented(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as info:
        channel.unary_unary(RUNTIME + "ListMetricDescriptors")(b"", timeout=5)
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_intercepted_request_keeps_fields_newer_than_our_stubs(channel: grpc.Channel, fake: FakeRuntime) -> None:
    config = cri.ContainerConfig(image=cri.ImageSpec(image="i"))
    request = cri.CreateContainerRequest(pod_sandbox_id="sb", config=config)
    # Field 1000 (varint 7), as a future kubelet might send it.
    payload = request.SerializeToString() + bytes([0xC0, 0x3E, 0x07])
    answer = channel.unary_unary(RUNTIME + "CreateContainer")(payload, timeout=5)
    assert cri.CreateContainerResponse.FromString(answer).container_id == "c-1"
    [(_, _, _, received)] = fake.seen
    assert received.endswith(bytes([0xC0, 0x3E, 0x07]))
    assert cri.CreateContainerRequest.FromString(received) == cri.CreateContainerRequest.FromString(payload)
