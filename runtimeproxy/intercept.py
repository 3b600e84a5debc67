"""The CRI RuntimeService calls the proxy intercepts to run hooks around them.

| CRI call                 | before forwarding                 | after the runtime succeeded    |
| ------------------------ | --------------------------------- | ------------------------------ |
| RunPodSandbox            | PreRunPodSandbox, patch config    | remember the sandbox           |
| StopPodSandbox           |                                   | PostStopPodSandbox             |
| RemovePodSandbox         |                                   | forget the sandbox             |
| CreateContainer          | PreCreateContainer, patch config  | remember the container         |
| StartContainer           | PreStartContainer                 | PostStartContainer             |
| StopContainer            |                                   | PostStopContainer              |
| RemoveContainer          |                                   | forget the container           |
| UpdateContainerResources | PreUpdateContainerResources, patch| remember the new resources     |

With `--apply-cdi`, CreateContainer also applies the container's CDI devices (after the hooks'
patch) and clears them from the request, for runtimes that ignore CRI's `CDI_devices`
(`runtimeproxy.cdi`).

Hooks are skipped for pods labelled `runtimeproxy.koordinator.sh/skip-hookserver=true` and when
no hook server is registered for the hook point. A pre hook rejected under the Fail policy fails
the call with FAILED_PRECONDITION and a message naming the pod, the hook and the endpoint; so
does a PreCreateContainer answer with a mount CRI cannot carry (`merge.UnsupportedMount`).
Requests are decoded with CRI v1 stubs and re-encoded; fields newer than the stubs survive as
unknown fields, so kubelet's request reaches the runtime whole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import grpc
from cri_api.v1 import api_pb2 as cri
from google.protobuf.message import Message

from proto.runtime.v1alpha1 import api_pb2 as hook
from runtimeproxy import cdi, merge, translate
from runtimeproxy.dispatch import Dispatcher, HookRejected
from runtimeproxy.hookconfig import HookType
from runtimeproxy.state import ContainerInfo, PodInfo, PodStore
from runtimeproxy.upstream import Upstream, abort

__all__ = ["SERVICE", "HookedRuntime"]

log = logging.getLogger(__name__)

SERVICE: Final = "runtime.v1.RuntimeService"


class HookedRuntime:
    """Serves the intercepted RuntimeService methods (see the module table)."""

    def __init__(
        self,
        upstream: Upstream,
        store: PodStore,
        dispatcher: Dispatcher,
        *,
        cdi_registry: cdi.CDIRegistry | None = None,
    ) -> None:
        """`cdi_registry`: apply containers' CDI devices (`--apply-cdi`); None leaves them to the runtime."""
        self._upstream = upstream
        self._store = store
        self._hooks = dispatcher
        self._cdi = cdi_registry

    def handler(self) -> grpc.GenericRpcHandler:
        """The gRPC handler for the intercepted methods; register it before the passthrough."""
        methods: dict[str, tuple[Callable[[Any, grpc.ServicerContext], Message], type[Message], type[Message]]] = {
            "RunPodSandbox": (self.run_pod_sandbox, cri.RunPodSandboxRequest, cri.RunPodSandboxResponse),
            "StopPodSandbox": (self.stop_pod_sandbox, cri.StopPodSandboxRequest, cri.StopPodSandboxResponse),
            "RemovePodSandbox": (self.remove_pod_sandbox, cri.RemovePodSandboxRequest, cri.RemovePodSandboxResponse),
            "CreateContainer": (self.create_container, cri.CreateContainerRequest, cri.CreateContainerResponse),
            "StartContainer": (self.start_container, cri.StartContainerRequest, cri.StartContainerResponse),
            "StopContainer": (self.stop_container, cri.StopContainerRequest, cri.StopContainerResponse),
            "RemoveContainer": (self.remove_container, cri.RemoveContainerRequest, cri.RemoveContainerResponse),
            "UpdateContainerResources": (
                self.update_container_resources,
                cri.UpdateContainerResourcesRequest,
                cri.UpdateContainerResourcesResponse,
            ),
        }
        handlers = {
            name: grpc.unary_unary_rpc_method_handler(
                fn, request_deserializer=req.FromString, response_serializer=resp.SerializeToString
            )
            for name, (fn, req, resp) in methods.items()
        }
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    # --- sandboxes -------------------------------------------------------------------------------
    def run_pod_sandbox(
        self, request: cri.RunPodSandboxRequest, context: grpc.ServicerContext
    ) -> cri.RunPodSandboxResponse:
        pod = PodInfo.from_sandbox_config(request.config, runtime_handler=request.runtime_handler)
        if self._applies(pod, HookType.PRE_RUN_POD_SANDBOX):
            overhead = request.config.linux.overhead if request.config.linux.HasField("overhead") else None
            hook_request = translate.sandbox_hook_request(pod, overhead=overhead)
            answer = self._sandbox_hook(context, HookType.PRE_RUN_POD_SANDBOX, hook_request, pod)
            merge.patch_run_pod_sandbox(request, answer)
            pod = PodInfo.from_sandbox_config(request.config, runtime_handler=request.runtime_handler)
        response = self._upstream.call(context, _path("RunPodSandbox"), request, cri.RunPodSandboxResponse)
        self._store.remember_pod(response.pod_sandbox_id, pod)
        return response

    def stop_pod_sandbox(
        self, request: cri.StopPodSandboxRequest, context: grpc.ServicerContext
    ) -> cri.StopPodSandboxResponse:
        pod = self._store.pod(request.pod_sandbox_id) if self._hooks.wants(HookType.POST_STOP_POD_SANDBOX) else None
        response = self._upstream.call(context, _path("StopPodSandbox"), request, cri.StopPodSandboxResponse)
        if pod is not None and not pod.skips_hooks:
            self._sandbox_hook(context, HookType.POST_STOP_POD_SANDBOX, translate.sandbox_hook_request(pod), pod)
        return response

    def remove_pod_sandbox(
        self, request: cri.RemovePodSandboxRequest, context: grpc.ServicerContext
    ) -> cri.RemovePodSandboxResponse:
        response = self._upstream.call(context, _path("RemovePodSandbox"), request, cri.RemovePodSandboxResponse)
        self._store.forget_pod(request.pod_sandbox_id)
        return response

    # --- containers ------------------------------------------------------------------------------
    def create_container(
        self, request: cri.CreateContainerRequest, context: grpc.ServicerContext
    ) -> cri.CreateContainerResponse:
        if self._hooks.wants(HookType.PRE_CREATE_CONTAINER):
            pod = self._pod_of(request)
            if not pod.skips_hooks:
                container = ContainerInfo.from_config(request.pod_sandbox_id, request.config)
                hook_request = translate.container_hook_request(pod, container)
                answer = self._container_hook(context, HookType.PRE_CREATE_CONTAINER, hook_request, pod)
                try:
                    merge.patch_create_container(request, answer)
                except merge.UnsupportedMount as e:
                    abort(
                        context,
                        grpc.StatusCode.FAILED_PRECONDITION,
                        f"pod {pod.ref}: runtime hook {HookType.PRE_CREATE_CONTAINER.value} answered a {e}",
                    )
        if self._cdi is not None and request.config.CDI_devices:
            self._apply_cdi(request, context)
        response = self._upstream.call(context, _path("CreateContainer"), request, cri.CreateContainerResponse)
        created = ContainerInfo.from_config(request.pod_sandbox_id, request.config, container_id=response.container_id)
        self._store.remember_container(response.container_id, created)
        return response

    def start_container(
        self, request: cri.StartContainerRequest, context: grpc.ServicerContext
    ) -> cri.StartContainerResponse:
        target = self._target(request.container_id, HookType.PRE_START_CONTAINER, HookType.POST_START_CONTAINER)
        if target is not None:
            self._container_hook(context, HookType.PRE_START_CONTAINER, *target)
        response = self._upstream.call(context, _path("StartContainer"), request, cri.StartContainerResponse)
        if target is not None:
            self._container_hook(context, HookType.POST_START_CONTAINER, *target)
        return response

    def stop_container(
        self, request: cri.StopContainerRequest, context: grpc.ServicerContext
    ) -> cri.StopContainerResponse:
        target = self._target(request.container_id, HookType.POST_STOP_CONTAINER)
        response = self._upstream.call(context, _path("StopContainer"), request, cri.StopContainerResponse)
        if target is not None:
            self._container_hook(context, HookType.POST_STOP_CONTAINER, *target)
        return response

    def remove_container(
        self, request: cri.RemoveContainerRequest, context: grpc.ServicerContext
    ) -> cri.RemoveContainerResponse:
        response = self._upstream.call(context, _path("RemoveContainer"), request, cri.RemoveContainerResponse)
        self._store.forget_container(request.container_id)
        return response

    def update_container_resources(
        self, request: cri.UpdateContainerResourcesRequest, context: grpc.ServicerContext
    ) -> cri.UpdateContainerResourcesResponse:
        target = self._target(request.container_id, HookType.PRE_UPDATE_CONTAINER_RESOURCES)
        if target is not None:
            hook_request, pod = target
            hook_request.container_resources.Clear()
            if request.HasField("linux"):
                merge.overlay_resources(hook_request.container_resources, request.linux)
            hook_request.container_annotations.update(request.annotations)
            answer = self._container_hook(context, HookType.PRE_UPDATE_CONTAINER_RESOURCES, hook_request, pod)
            merge.patch_update_container_resources(request, answer)
        response = self._upstream.call(
            context, _path("UpdateContainerResources"), request, cri.UpdateContainerResourcesResponse
        )
        known = self._store.container(request.container_id) if request.HasField("linux") else None
        if known is not None:
            self._store.remember_container(request.container_id, known.with_resources(request.linux))
        return response

    def _apply_cdi(self, request: cri.CreateContainerRequest, context: grpc.ServicerContext) -> None:
        """Apply the container's CDI devices (runtimeproxy.cdi); FAILED_PRECONDITION when they cannot be."""
        assert self._cdi is not None
        names = [d.name for d in request.config.CDI_devices]
        pod = PodInfo.from_sandbox_config(request.sandbox_config).ref
        try:
            merge.patch_create_container(request, cdi.answer_for(self._cdi.resolve(names)))
        except (cdi.CDIError, merge.UnsupportedMount) as e:
            abort(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                f"pod {pod}: container {request.config.metadata.name}: {e}",
            )
        cdi.clear(request.config)
        log.info(
            "Applied CDI devices",
            extra={"pod": pod, "container": request.config.metadata.name, "devices": ",".join(names)},
        )

    # --- helpers ---------------------------------------------------------------------------------
    def _applies(self, pod: PodInfo, hook_type: HookType) -> bool:
        return not pod.skips_hooks and self._hooks.wants(hook_type)

    def _pod_of(self, request: cri.CreateContainerRequest) -> PodInfo:
        """The pod as the runtime knows it, completed by (or, if unknown, taken from) the request."""
        from_request = PodInfo.from_sandbox_config(request.sandbox_config)
        known = self._store.pod(request.pod_sandbox_id)
        if known is None:
            log.warning(
                "Sandbox unknown to the runtime; using the sandbox config of the request",
                extra={"sandbox": request.pod_sandbox_id, "pod": from_request.ref},
            )
            return from_request
        return known.completed_by(from_request)

    def _target(
        self, container_id: str, *hook_types: HookType
    ) -> tuple[hook.ContainerResourceHookRequest, PodInfo] | None:
        """The hook request for an existing container, or None when no hook applies."""
        if not any(self._hooks.wants(h) for h in hook_types):
            return None
        container = self._store.container(container_id)
        pod = self._store.pod(container.sandbox_id) if container is not None else None
        if container is None or pod is None:
            log.warning("Container unknown to the runtime; no hooks run", extra={"container": container_id})
            return None
        if pod.skips_hooks:
            return None
        return translate.container_hook_request(pod, container), pod

    def _sandbox_hook(
        self,
        context: grpc.ServicerContext,
        hook_type: HookType,
        request: hook.PodSandboxHookRequest,
        pod: PodInfo,
    ) -> hook.PodSandboxHookResponse:
        try:
            return self._hooks.pod_sandbox(hook_type, request, pod=pod.ref)
        except HookRejected as e:
            abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(e))

    def _container_hook(
        self,
        context: grpc.ServicerContext,
        hook_type: HookType,
        request: hook.ContainerResourceHookRequest,
        pod: PodInfo,
    ) -> hook.ContainerResourceHookResponse:
        try:
            return self._hooks.container(hook_type, request, pod=pod.ref)
        except HookRejected as e:
            abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(e))


def _path(method: str) -> str:
    return f"/{SERVICE}/{method}"
