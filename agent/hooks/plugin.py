"""The interface every runtime-hook plugin implements (GPU env, RDMA devices, QoS, ...).

The hook server receives Koordinator-compatible `runtime.v1alpha1` requests and runs each
registered plugin in order on the same response message, so plugins compose: one sets
`NVIDIA_VISIBLE_DEVICES`, another the cgroup resources. A plugin overrides only the hooks it
needs; the defaults do nothing.

Contract:
- a plugin reads the request and writes into the response; it never does slow I/O (the hook
  path sits inside kubelet's CreateContainer call);
- bad input (a malformed annotation) raises `HookError` with a message naming the pod and the
  problem; the server answers the RPC with that error and keeps serving. Two kinds say more:
  `HookRefused` (well-formed, but the node will not do it: the pod's devices collide) and
  `HookNotReady` (the plugin cannot decide yet; the caller should retry);
- any other exception is a bug: the server logs the stack and answers with an internal error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from apis.errors import TesseraError

if TYPE_CHECKING:  # the messages load with the server; QoS subclasses this without it
    from proto.runtime.v1alpha1 import api_pb2

__all__ = ["HookError", "HookNotReady", "HookPlugin", "HookRefused"]


class HookError(TesseraError):
    """The request cannot be served as asked (e.g. a malformed device-allocated annotation)."""


class HookRefused(HookError):
    """The request is well-formed, but this node refuses it (e.g. its devices are held by other pods)."""


class HookNotReady(HookError):
    """The plugin cannot decide yet (e.g. the agent has not read the node's pods); retrying may help."""


class HookPlugin:
    """Base class: override the hooks the plugin needs. `name` appears in logs and errors."""

    name: str = "unnamed"

    def pre_run_pod_sandbox(
        self, request: api_pb2.PodSandboxHookRequest, response: api_pb2.PodSandboxHookResponse
    ) -> None:
        return None

    def post_stop_pod_sandbox(
        self, request: api_pb2.PodSandboxHookRequest, response: api_pb2.PodSandboxHookResponse
    ) -> None:
        return None

    def pre_create_container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        return None

    def pre_start_container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        return None

    def post_start_container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        return None

    def post_stop_container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        return None

    def pre_update_container_resources(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        return None
