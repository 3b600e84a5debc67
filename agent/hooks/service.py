"""The `runtime.v1alpha1.RuntimeHookService` servicer: runs the agent's hook plugins.

Every RPC of the service maps to one `HookPlugin` method (`HOOKS`); a call runs each plugin in
registration order on one shared response, so plugins compose (GPU env, RDMA devices, QoS).
This is the loop boundary of the hook server: a `HookError` becomes an error answer that names
the plugin and the problem — INVALID_ARGUMENT for bad input, FAILED_PRECONDITION for a refusal
(`HookRefused`), UNAVAILABLE for "not ready, retry" (`HookNotReady`); any other exception is
logged with its stack and becomes INTERNAL. Either way the server keeps serving. A message too
long for gRPC's trailers is cut (`kube.grpcstatus`), so the caller gets the refusal and its
reason's start rather than RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import grpc
from google.protobuf.message import Message

from agent.hooks import _requests
from agent.hooks.plugin import HookError, HookNotReady, HookPlugin, HookRefused
from kube import grpcstatus
from proto.runtime.v1alpha1 import api_pb2

__all__ = ["HOOKS", "SERVICE", "HookRequest", "RuntimeHookService"]

log = logging.getLogger(__name__)

SERVICE: Final = api_pb2.DESCRIPTOR.services_by_name["RuntimeHookService"]

#: RPC name -> the HookPlugin method that serves it.
HOOKS: Final[Mapping[str, str]] = {
    "PreRunPodSandboxHook": "pre_run_pod_sandbox",
    "PostStopPodSandboxHook": "post_stop_pod_sandbox",
    "PreCreateContainerHook": "pre_create_container",
    "PreStartContainerHook": "pre_start_container",
    "PostStartContainerHook": "post_start_container",
    "PostStopContainerHook": "post_stop_container",
    "PreUpdateContainerResourcesHook": "pre_update_container_resources",
}


#: The answer to a HookError, most specific class first.
_CODES: Final = (
    (HookRefused, grpc.StatusCode.FAILED_PRECONDITION),
    (HookNotReady, grpc.StatusCode.UNAVAILABLE),
    (HookError, grpc.StatusCode.INVALID_ARGUMENT),
)


#: Either request type of the service; both carry the pod's metadata.
HookRequest = api_pb2.PodSandboxHookRequest | api_pb2.ContainerResourceHookRequest


class RuntimeHookService:
    """Serves every hook RPC by running `plugins` in order; see the module docstring."""

    def __init__(self, plugins: Sequence[HookPlugin]) -> None:
        self._plugins = tuple(plugins)

    def handler(self) -> grpc.GenericRpcHandler:
        """The gRPC handler for all methods of the service, for `grpc.Server.add_generic_rpc_handlers`."""
        handlers = {}
        for method in SERVICE.methods:
            request_type: type[Message] = getattr(api_pb2, method.input_type.name)
            response_type: type[Message] = getattr(api_pb2, method.output_type.name)
            call: Callable[[HookRequest, grpc.ServicerContext], Message] = functools.partial(
                self.call, method.name, response_type
            )
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                call,
                request_deserializer=request_type.FromString,
                response_serializer=response_type.SerializeToString,
            )
        return grpc.method_handlers_generic_handler(SERVICE.full_name, handlers)

    def call(
        self, rpc: str, response_type: type[Message], request: HookRequest, context: grpc.ServicerContext
    ) -> Message:
        """Run the plugins' method for `rpc` on `request`; aborts the RPC on a plugin failure."""
        method = HOOKS[rpc]
        response = response_type()
        pod = _requests.pod_ref(request.pod_meta)
        for plugin in self._plugins:
            try:
                getattr(plugin, method)(request, response)
            except HookError as e:
                log.warning(
                    "Hook rejected the request", extra={"hook": rpc, "plugin": plugin.name, "pod": pod, "err": str(e)}
                )
                context.abort(_code(e), grpcstatus.details(f"{plugin.name}: {e}"))
            except Exception:
                log.exception("Hook plugin failed", extra={"hook": rpc, "plugin": plugin.name, "pod": pod})
                context.abort(
                    grpc.StatusCode.INTERNAL, f"{plugin.name}: internal error in the hook plugin (see the agent's log)"
                )
        return response


def _code(error: HookError) -> grpc.StatusCode:
    return next(code for kind, code in _CODES if isinstance(error, kind))
