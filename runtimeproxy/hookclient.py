"""Calling hook servers: one gRPC channel per endpoint, a deadline on every call.

The proxy calls hook servers inside kubelet's CRI calls, so a hook server that is down or slow
must cost little: calls never wait for a connection (they fail at once with UNAVAILABLE) and
carry a deadline; channels back off at most one second between reconnects, so a restarted agent
is reachable again quickly.
"""

from __future__ import annotations

import threading
from typing import Final, TypeVar

import grpc
from google.protobuf.message import Message

from apis.errors import TesseraError
from kube import unixsocket
from proto.runtime.v1alpha1 import api_pb2
from runtimeproxy.hookconfig import HookType

__all__ = ["HookCallError", "HookClient"]

_SERVICE: Final = "/runtime.v1alpha1.RuntimeHookService/"
_CHANNEL_OPTIONS: Final = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
ResponseT = TypeVar("ResponseT", api_pb2.PodSandboxHookResponse, api_pb2.ContainerResourceHookResponse)


class HookCallError(TesseraError):
    """A hook server did not answer, or answered with an error status."""

    def __init__(self, endpoint: str, hook: HookType, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"runtime hook {hook.value} at {endpoint}: {code.name}: {details}")
        self.endpoint = endpoint
        self.hook = hook
        self.code = code
        self.details = details


class HookClient:
    """Calls RuntimeHookService methods on hook servers given by endpoint. Thread-safe."""

    def __init__(self, *, timeout_s: float = 2.0) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}

    def call(self, endpoint: str, hook: HookType, request: Message, response_type: type[ResponseT]) -> ResponseT:
        """Call `hook` on the server at `endpoint`, decoding the answer as `response_type`.

        Raises HookCallError on any failure (not reachable, deadline passed, error status).
        """
        method = self._channel(endpoint).unary_unary(
            _SERVICE + hook.rpc,
            request_serializer=type(request).SerializeToString,
            response_deserializer=response_type.FromString,
        )
        try:
            response: ResponseT = method(request, timeout=self.timeout_s)
        except grpc.RpcError as e:
            raise HookCallError(endpoint, hook, e.code(), e.details() or "") from None
        return response

    def close(self) -> None:
        with self._lock:
            channels, self._channels = self._channels, {}
        for channel in channels.values():
            channel.close()

    def _channel(self, endpoint: str) -> grpc.Channel:
        with self._lock:
            channel = self._channels.get(endpoint)
            if channel is None:
                channel = grpc.insecure_channel(unixsocket.target(endpoint), options=_CHANNEL_OPTIONS)
                self._channels[endpoint] = channel
            return channel
