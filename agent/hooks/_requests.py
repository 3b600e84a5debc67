"""Reading hook requests: which pod a request is about, and the devices it was allocated.

Shared by the hook service (for log context) and the device plugins (GPU env, RDMA devices), so
every plugin reports a malformed annotation with the same message.
"""

from __future__ import annotations

from agent.hooks.plugin import HookError
from apis.crds.device import DeviceType
from apis.errors import AnnotationError
from apis.extension import allocation
from apis.extension.allocation import DeviceAllocation
from proto.runtime.v1alpha1 import api_pb2

__all__ = ["device_allocations", "pod_ref"]


def pod_ref(meta: api_pb2.PodSandboxMetadata) -> str:
    """`namespace/name` of the pod, as logs and errors write objects."""
    return f"{meta.namespace}/{meta.name}"


def device_allocations(
    request: api_pb2.ContainerResourceHookRequest,
) -> dict[DeviceType, tuple[DeviceAllocation, ...]]:
    """The pod's `device-allocated` annotation, decoded; empty when the pod has none.

    Raises HookError (naming the pod and the problem) when the annotation is malformed.
    """
    try:
        return allocation.from_pod_annotations(request.pod_annotations, obj=f"pod {pod_ref(request.pod_meta)}")
    except AnnotationError as e:
        raise HookError(str(e)) from e
