"""GPU env hook: make a container see exactly the GPUs the scheduler allocated to its pod.

PreCreateContainer reads the pod's `device-allocated` annotation and sets
`NVIDIA_VISIBLE_DEVICES` to the allocated GPU minors, in allocation order (the NVIDIA container
runtime exposes exactly those device nodes). Then, for a share below a whole GPU:

- a pod labelled `koordinator.sh/gpu-isolation-provider: HAMi-core` gets what Koordinator's GPU
  hook gives it (`agent/hooks/hamicore.py`): the limits in HAMi-core's variables, `LD_PRELOAD` of
  the library and the bind mounts it needs (the runtime proxy applies them), so the share is
  enforced whatever the image; the node refuses the container when the library is missing;
- any other shared pod is only told its share, in the variables HAMi-core reads, so an image that
  preloads HAMi-core itself enforces it: `CUDA_DEVICE_MEMORY_LIMIT_<i>` (bytes of GPU memory for
  the i-th visible GPU, i counting from 0 in `NVIDIA_VISIBLE_DEVICES` order, the CUDA device
  index inside the container) and `CUDA_DEVICE_SM_LIMIT` (percent of each GPU's compute: the
  smallest per-GPU `gpu-core` share, which the protocol makes equal on every GPU of a pod).

Whole GPUs get only `NVIDIA_VISIBLE_DEVICES`. Pods without a GPU allocation are left alone. Every
container of the pod gets the pod's GPUs (the annotation is per pod, as in Koordinator).
"""

from __future__ import annotations

from typing import Final

from agent.hooks import _requests, hamicore
from agent.hooks.hamicore import ENV_MEMORY_LIMIT_PREFIX, ENV_SM_LIMIT, HAMiCore
from agent.hooks.plugin import HookPlugin
from apis.crds.device import DeviceType
from proto.runtime.v1alpha1 import api_pb2

__all__ = ["ENV_MEMORY_LIMIT_PREFIX", "ENV_SM_LIMIT", "ENV_VISIBLE_DEVICES", "GPUEnvPlugin"]

ENV_VISIBLE_DEVICES: Final = "NVIDIA_VISIBLE_DEVICES"
#: koordlet's mounts: a recursive bind.
_MOUNT_TYPE: Final = "bind"
_MOUNT_OPTIONS: Final = ("rbind",)


class GPUEnvPlugin(HookPlugin):
    """Sets `NVIDIA_VISIBLE_DEVICES`, and isolation (or its limits) for shared GPUs, on container creation."""

    name = "gpu-env"

    def __init__(self, hami_core: HAMiCore | None = None) -> None:
        self.hami_core = hami_core if hami_core is not None else HAMiCore()

    def pre_create_container(
        self, request: api_pb2.ContainerResourceHookRequest, response: api_pb2.ContainerResourceHookResponse
    ) -> None:
        gpus = _requests.device_allocations(request).get(DeviceType.GPU, ())
        if not gpus:
            return
        pod = _requests.pod_ref(request.pod_meta)
        response.container_envs[ENV_VISIBLE_DEVICES] = ",".join(str(gpu.minor) for gpu in gpus)
        if hamicore.labelled(request.pod_labels):
            setup = hamicore.isolation(
                self.hami_core, gpus, pod=pod, pod_uid=request.pod_meta.uid, container=request.container_meta.name
            )
            if setup is not None:
                hamicore.prepare_host(self.hami_core, setup, pod=pod)
                response.container_envs.update(setup.envs)
                for mount in setup.mounts:
                    response.container_mounts.add(
                        destination=mount.destination, type=_MOUNT_TYPE, source=mount.source, options=_MOUNT_OPTIONS
                    )
        elif hamicore.is_shared(gpus):
            response.container_envs.update(hamicore.share_limits(gpus, pod=pod))
