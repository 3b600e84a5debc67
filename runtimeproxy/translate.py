"""Hook requests built from what the proxy knows about a pod and a container.

Koordinator's proxy fills the same fields the same way, so a hook server (Tessera's agent or
koordlet) sees one request shape whichever proxy calls it.
"""

from __future__ import annotations

from cri_api.v1 import api_pb2 as cri

from proto.runtime.v1alpha1 import api_pb2 as hook
from runtimeproxy import merge
from runtimeproxy.state import ContainerInfo, PodInfo

__all__ = ["container_hook_request", "sandbox_hook_request"]


def sandbox_hook_request(
    pod: PodInfo, *, overhead: cri.LinuxContainerResources | None = None
) -> hook.PodSandboxHookRequest:
    request = hook.PodSandboxHookRequest(
        pod_meta=_pod_meta(pod),
        runtime_handler=pod.runtime_handler,
        labels=pod.labels,
        annotations=pod.annotations,
        cgroup_parent=pod.cgroup_parent,
    )
    if overhead is not None:
        merge.overlay_resources(request.overhead, overhead)
    if pod.resources is not None:
        merge.overlay_resources(request.resources, pod.resources)
    return request


def container_hook_request(pod: PodInfo, container: ContainerInfo) -> hook.ContainerResourceHookRequest:
    request = hook.ContainerResourceHookRequest(
        pod_meta=_pod_meta(pod),
        container_meta=hook.ContainerMetadata(name=container.name, attempt=container.attempt, id=container.id),
        container_annotations=container.annotations,
        pod_annotations=pod.annotations,
        pod_labels=pod.labels,
        pod_cgroup_parent=pod.cgroup_parent,
        container_envs=container.envs,
    )
    if container.resources is not None:
        merge.overlay_resources(request.container_resources, container.resources)
    if pod.resources is not None:
        merge.overlay_resources(request.pod_resources, pod.resources)
    return request


def _pod_meta(pod: PodInfo) -> hook.PodSandboxMetadata:
    return hook.PodSandboxMetadata(name=pod.name, namespace=pod.namespace, uid=pod.uid, attempt=pod.attempt)
