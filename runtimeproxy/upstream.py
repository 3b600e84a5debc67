"""The real container runtime behind the proxy, and the rules for forwarding calls to it.

Both intercepted calls (decoded, patched, re-encoded) and passed-through calls (raw bytes) go
through here, so they forward alike: the caller's deadline and metadata travel on, and the
runtime's error status and message come back to kubelet unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Final, NoReturn, TypeVar

import grpc
from cri_api.v1 import api_pb2_grpc as cri_grpc
from google.protobuf.message import Message

from kube import grpcstatus, unixsocket

__all__ = ["CHANNEL_OPTIONS", "MESSAGE_LIMIT_BYTES", "Upstream", "abort", "relay_error"]

#: kubelet's own limit for CRI messages (16 MiB); gRPC's default of 4 MiB would cut ListContainers.
MESSAGE_LIMIT_BYTES: Final = 16 * 1024 * 1024
CHANNEL_OPTIONS: Final = (
    ("grpc.max_receive_message_length", MESSAGE_LIMIT_BYTES),
    ("grpc.max_send_message_length", MESSAGE_LIMIT_BYTES),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
_IMAGE_SERVICES: Final = ("/runtime.v1.ImageService/", "/runtime.v1alpha2.ImageService/")
_HOP_BY_HOP: Final = frozenset({"user-agent", "content-type", "te"})
# A deadline further away than this means none was set (gRPC reports an effectively infinite one).
_NO_DEADLINE_S: Final = 10 * 365 * 24 * 3600.0

ResponseT = TypeVar("ResponseT", bound=Message)


def abort(context: grpc.ServicerContext, code: grpc.StatusCode, details: str) -> NoReturn:
    """End the RPC with an error status: `context.abort`, which always raises. A message too long
    for gRPC's trailers is cut (`kube.grpcstatus`), so kubelet gets the error, not RESOURCE_EXHAUSTED."""
    context.abort(code, grpcstatus.details(details))
    raise AssertionError("grpc.ServicerContext.abort returned")


def relay_error(context: grpc.ServicerContext, error: grpc.RpcError) -> NoReturn:
    """Answer the caller with the runtime's status code and message (raises, as `abort` does)."""
    abort(context, error.code(), error.details() or "")


class Upstream:
    """Channels to the runtime's RuntimeService and ImageService endpoints (often the same)."""

    def __init__(self, runtime_endpoint: str, image_endpoint: str = "") -> None:
        runtime_target = unixsocket.target(runtime_endpoint)
        image_target = unixsocket.target(image_endpoint) if image_endpoint else runtime_target
        self._runtime = grpc.insecure_channel(runtime_target, options=CHANNEL_OPTIONS)
        self._image = self._runtime
        if image_target != runtime_target:
            self._image = grpc.insecure_channel(image_target, options=CHANNEL_OPTIONS)
        self.runtime = cri_grpc.RuntimeServiceStub(self._runtime)  # type: ignore[no-untyped-call]
        # Multi-callables by method, made once: building one per call costs on the hot path.
        self._unary: dict[str, grpc.UnaryUnaryMultiCallable[bytes, bytes]] = {}
        self._streams: dict[str, grpc.StreamStreamMultiCallable[bytes, bytes]] = {}

    def close(self) -> None:
        self._runtime.close()
        if self._image is not self._runtime:
            self._image.close()

    def channel(self, method: str) -> grpc.Channel:
        """The channel that serves `method` (a full path such as `/runtime.v1.ImageService/PullImage`)."""
        return self._image if method.startswith(_IMAGE_SERVICES) else self._runtime

    def call(
        self, context: grpc.ServicerContext, method: str, request: Message, response_type: type[ResponseT]
    ) -> ResponseT:
        """Forward a decoded request; relays the runtime's error to the caller."""
        answer = self.forward_unary(method, request.SerializeToString(), context)
        return response_type.FromString(answer)

    def forward_unary(self, method: str, payload: bytes, context: grpc.ServicerContext) -> bytes:
        """Forward one request as raw bytes and return the raw answer."""
        stub = self._unary.get(method)
        if stub is None:
            stub = self._unary[method] = self.channel(method).unary_unary(method)
        try:
            answer: bytes = stub(payload, timeout=_timeout(context), metadata=_metadata(context))
        except grpc.RpcError as e:
            relay_error(context, e)
        return answer

    def forward_stream(self, method: str, payloads: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        """Forward a call of any other shape as a raw byte stream both ways.

        On the wire a unary call is a stream of one message, so this serves unary, client-,
        server- and bidirectional-streaming methods alike, including ones added to CRI later.
        """
        stub = self._streams.get(method)
        if stub is None:
            stub = self._streams[method] = self.channel(method).stream_stream(method)
        call = stub(payloads, timeout=_timeout(context), metadata=_metadata(context))

        def cancel() -> None:  # the caller went away: so does our call to the runtime
            call.cancel()

        context.add_callback(cancel)
        try:
            yield from call
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED or context.is_active():
                relay_error(context, e)


def _timeout(context: grpc.ServicerContext) -> float | None:
    remaining: float | None = context.time_remaining()
    if remaining is None or math.isinf(remaining) or remaining > _NO_DEADLINE_S:
        return None
    return max(remaining, 0.0)


def _metadata(context: grpc.ServicerContext) -> tuple[tuple[str, str | bytes], ...]:
    return tuple(
        (key, value)
        for key, value in context.invocation_metadata()
        if not key.startswith((":", "grpc-")) and key not in _HOP_BY_HOP
    )
