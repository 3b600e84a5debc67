"""Merging hook answers: into each other, into the next hook server's request, into CRI requests.

Pure functions over protobuf messages; the proxy's only policy about what a hook may change.
Later answers win: maps (annotations, labels, envs) are updated key by key; a resource field
that a hook sets (non-zero, non-empty) replaces the request's; a non-empty cgroup parent
replaces the request's; devices (a Tessera extension) are appended unless the container already
has a device at the same container path; mounts (a Tessera extension, koordlet's and NRI's
shape) replace a mount at the same container path, as NRI's mount adjustments do, and are
otherwise appended. CRI carries bind mounts only: a mount it cannot express is refused with
`UnsupportedMount` rather than dropped (a dropped HAMi-core mount would leave a GPU share
unenforced without a word).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeVar

from cri_api.v1 import api_pb2 as cri

from apis.errors import TesseraError
from proto.runtime.v1alpha1 import api_pb2 as hook

__all__ = [
    "UnsupportedMount",
    "container_request_with",
    "merge_container_response",
    "merge_sandbox_response",
    "overlay_resources",
    "patch_create_container",
    "patch_run_pod_sandbox",
    "patch_update_container_resources",
    "sandbox_request_with",
]

#: Mount options CRI expresses: the bind itself (CRI's runtime always binds recursively),
#: read-only or not, and the propagation.
_BIND_OPTIONS: Final = frozenset({"bind", "rbind"})
_PROPAGATION: Final = {
    "private": cri.PROPAGATION_PRIVATE,
    "rprivate": cri.PROPAGATION_PRIVATE,
    "slave": cri.PROPAGATION_HOST_TO_CONTAINER,
    "rslave": cri.PROPAGATION_HOST_TO_CONTAINER,
    "shared": cri.PROPAGATION_BIDIRECTIONAL,
    "rshared": cri.PROPAGATION_BIDIRECTIONAL,
}


class UnsupportedMount(TesseraError):
    """A hook answered a mount that CRI's ContainerConfig cannot carry (not a bind mount, or an
    option CRI has no field for)."""


ResourcesT = TypeVar("ResourcesT", cri.LinuxContainerResources, hook.LinuxContainerResources)


def overlay_resources(target: ResourcesT, patch: cri.LinuxContainerResources | hook.LinuxContainerResources) -> None:
    """Copy every field that `patch` sets onto `target` (CRI's or the hook protocol's type).

    The hook protocol's LinuxContainerResources mirrors CRI's field by field with the same
    numbers (docs/protocol.md), so one type converts to the other through the wire format;
    hugepage limits are replaced as a whole rather than appended.
    """
    converted = type(target).FromString(patch.SerializeToString())
    if converted.hugepage_limits:
        del target.hugepage_limits[:]
    target.MergeFrom(converted)


def merge_sandbox_response(into: hook.PodSandboxHookResponse, new: hook.PodSandboxHookResponse) -> None:
    """Fold a later hook server's answer into the answers so far."""
    _apply_sandbox(into, new)


def merge_container_response(into: hook.ContainerResourceHookResponse, new: hook.ContainerResourceHookResponse) -> None:
    """Fold a later hook server's answer into the answers so far."""
    _apply_container(into, new)
    _merge_mounts(into, new)
    present = {d.container_path for d in into.container_devices}
    for device in new.container_devices:
        if device.container_path not in present:
            into.container_devices.add().CopyFrom(device)
            present.add(device.container_path)


def sandbox_request_with(
    request: hook.PodSandboxHookRequest, response: hook.PodSandboxHookResponse
) -> hook.PodSandboxHookRequest:
    """A copy of `request` as the next hook server should see it, after the answers so far."""
    updated = hook.PodSandboxHookRequest()
    updated.CopyFrom(request)
    _apply_sandbox(updated, response)
    return updated


def container_request_with(
    request: hook.ContainerResourceHookRequest, response: hook.ContainerResourceHookResponse
) -> hook.ContainerResourceHookRequest:
    """A copy of `request` as the next hook server should see it, after the answers so far."""
    updated = hook.ContainerResourceHookRequest()
    updated.CopyFrom(request)
    _apply_container(updated, response)
    return updated


def _apply_sandbox(
    target: hook.PodSandboxHookRequest | hook.PodSandboxHookResponse, response: hook.PodSandboxHookResponse
) -> None:
    # Request and response name these fields alike, so one rule serves both.
    target.labels.update(response.labels)
    target.annotations.update(response.annotations)
    if response.cgroup_parent:
        target.cgroup_parent = response.cgroup_parent
    if response.HasField("resources"):
        overlay_resources(target.resources, response.resources)


def _apply_container(
    target: hook.ContainerResourceHookRequest | hook.ContainerResourceHookResponse,
    response: hook.ContainerResourceHookResponse,
) -> None:
    # Request and response name these fields alike, so one rule serves both.
    target.container_annotations.update(response.container_annotations)
    target.container_envs.update(response.container_envs)
    if response.pod_cgroup_parent:
        target.pod_cgroup_parent = response.pod_cgroup_parent
    if response.HasField("container_resources"):
        overlay_resources(target.container_resources, response.container_resources)


def patch_run_pod_sandbox(request: cri.RunPodSandboxRequest, response: hook.PodSandboxHookResponse) -> None:
    config = request.config
    config.labels.update(response.labels)
    config.annotations.update(response.annotations)
    if response.cgroup_parent:
        config.linux.cgroup_parent = response.cgroup_parent
    if response.HasField("resources"):
        overlay_resources(config.linux.resources, response.resources)


def patch_create_container(request: cri.CreateContainerRequest, response: hook.ContainerResourceHookResponse) -> None:
    """Apply the merged answer to kubelet's request. Raises UnsupportedMount (before changing
    anything) for a mount CRI cannot carry."""
    config = request.config
    mounts = [to_cri_mount(m) for m in response.container_mounts]
    config.annotations.update(response.container_annotations)
    _set_envs(config, response.container_envs)
    if response.HasField("container_resources"):
        overlay_resources(config.linux.resources, response.container_resources)
    if response.pod_cgroup_parent:
        request.sandbox_config.linux.cgroup_parent = response.pod_cgroup_parent
    present = {d.container_path for d in config.devices}
    for device in response.container_devices:
        if device.container_path not in present:
            config.devices.add(
                container_path=device.container_path, host_path=device.host_path, permissions=device.permissions
            )
            present.add(device.container_path)
    if mounts:
        replaced = {m.container_path for m in mounts}
        kept = [m for m in config.mounts if m.container_path not in replaced]
        del config.mounts[:]
        config.mounts.extend([*kept, *mounts])


def to_cri_mount(mount: hook.Mount) -> cri.Mount:
    """The CRI mount for a hook's bind mount. Raises UnsupportedMount for another type, a
    relative path or an option CRI has no field for."""
    where = f"mount {mount.source!r} at {mount.destination!r}"
    if mount.type not in ("", "bind"):
        raise UnsupportedMount(f"{where}: type {mount.type!r}: CRI carries bind mounts only")
    if not mount.destination.startswith("/") or not mount.source.startswith("/"):
        raise UnsupportedMount(f"{where}: source and destination must be absolute paths")
    readonly = False
    propagation = cri.PROPAGATION_PRIVATE
    for option in mount.options:
        if option in ("ro", "rw"):
            readonly = option == "ro"
        elif option in _PROPAGATION:
            propagation = _PROPAGATION[option]
        elif option not in _BIND_OPTIONS:
            raise UnsupportedMount(f"{where}: option {option!r}: CRI has no field for it")
    return cri.Mount(
        container_path=mount.destination, host_path=mount.source, readonly=readonly, propagation=propagation
    )


def _merge_mounts(into: hook.ContainerResourceHookResponse, new: hook.ContainerResourceHookResponse) -> None:
    """A later answer's mount replaces an earlier one at the same destination."""
    if not new.container_mounts:
        return
    replaced = {m.destination for m in new.container_mounts}
    kept = [m for m in into.container_mounts if m.destination not in replaced]
    del into.container_mounts[:]
    into.container_mounts.extend([*kept, *new.container_mounts])


def patch_update_container_resources(
    request: cri.UpdateContainerResourcesRequest, response: hook.ContainerResourceHookResponse
) -> None:
    request.annotations.update(response.container_annotations)
    if response.HasField("container_resources"):
        overlay_resources(request.linux, response.container_resources)


def _set_envs(config: cri.ContainerConfig, envs: Mapping[str, str]) -> None:
    """Replace the values of variables the container already sets; append the others, sorted."""
    remaining = dict(envs)
    for entry in config.envs:
        if entry.key in envs:
            entry.value = envs[entry.key]
            remaining.pop(entry.key, None)
    for key in sorted(remaining):
        config.envs.add(key=key, value=remaining[key])
