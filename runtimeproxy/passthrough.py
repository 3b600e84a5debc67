"""Every CRI call the proxy does not intercept, forwarded to the runtime as raw bytes.

Not decoding these calls keeps the proxy correct across CRI versions: a field or a method that
is newer than the CRI stubs Tessera was built with passes through untouched. Methods known to
be unary (all unary methods of CRI v1 and v1alpha2) are forwarded as unary calls; anything else
(GetContainerEvents, methods of a future CRI) as a byte stream, which carries any call shape.
"""

from __future__ import annotations

import functools
from typing import Final

import grpc
from cri_api.v1 import api_pb2 as cri_v1
from cri_api.v1alpha2 import api_pb2 as cri_v1alpha2

from runtimeproxy.upstream import Upstream

__all__ = ["UNARY_METHODS", "Passthrough"]


def _unary_methods() -> frozenset[str]:
    return frozenset(
        f"/{service.full_name}/{method.name}"
        for module in (cri_v1, cri_v1alpha2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
        if not method.client_streaming and not method.server_streaming
    )


#: Full method paths that are unary in every CRI version the stubs know.
UNARY_METHODS: Final = _unary_methods()


class Passthrough(grpc.GenericRpcHandler):
    """A generic handler that forwards any method to the runtime, byte for byte."""

    def __init__(self, upstream: Upstream) -> None:
        self._upstream = upstream

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[bytes, bytes]:
        method: str = handler_call_details.method
        if method in UNARY_METHODS:
            return grpc.unary_unary_rpc_method_handler(functools.partial(self._upstream.forward_unary, method))
        return grpc.stream_stream_rpc_method_handler(functools.partial(self._upstream.forward_stream, method))
