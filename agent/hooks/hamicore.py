"""GPU isolation by HAMi-core: what a container needs for its GPU share to be enforced.

HAMi-core (`libvgpu.so`, Project-HAMi/HAMi-core) is preloaded into a container and sits between
the CUDA runtime and the driver, enforcing a share of each visible GPU. It reads:

| variable                           | meaning                                                        |
| ---------------------------------- | -------------------------------------------------------------- |
| `CUDA_DEVICE_MEMORY_LIMIT`         | memory of every visible GPU: bytes, or with a `k`/`m`/`g` suffix |
| `CUDA_DEVICE_MEMORY_LIMIT_<i>`     | the same for the i-th visible GPU; wins over the one above      |
| `CUDA_DEVICE_SM_LIMIT`             | percent of each GPU's compute (0 or unset: no limit)            |
| `CUDA_DEVICE_MEMORY_SHARED_CACHE`  | the file the container's processes account their memory in     |

and keeps its locks in `/tmp/vgpulock` (a host directory every container shares).

Koordinator's koordlet (`pkg/koordlet/runtimehooks/hooks/gpu`) acts on a pod labelled
`koordinator.sh/gpu-isolation-provider: HAMi-core` whose *first* allocated GPU has a
`gpu-memory-ratio` below 100, and then, for every container of the pod:

- `CUDA_DEVICE_MEMORY_LIMIT` = that GPU's `gpu-memory` in bytes (a plain integer);
- `CUDA_DEVICE_SM_LIMIT` = its `gpu-core`, when the allocation has one;
- `LD_PRELOAD` = the library's path (koordlet's `--hami-core-library-directory-path`, a file
  despite the name; default `/usr/local/vgpu/libvgpu.so`);
- bind mounts (type `bind`, options `rbind`): the library at the same path, and the host's
  `/tmp/vgpulock` at `/tmp/vgpulock`;
- with its `HamiCoreVGPUMonitor` feature gate (off by default), for HAMi's vGPU monitor:
  `CUDA_DEVICE_MEMORY_SHARED_CACHE` = `<library dir>/<pod uid>_<container>.cache`, and the host
  directory `<library dir>/containers/<pod uid>_<container>` — emptied, created mode 0777 —
  mounted at `<library dir>` (the runtime mounts the library file over it: it sorts mounts by
  depth).

A labelled pod whose first GPU has no `gpu-memory-ratio` (or, when shared, no `gpu-memory`) is an
error, as in koordlet. `isolation` computes the same, adding one thing: `CUDA_DEVICE_MEMORY_LIMIT_<i>`
for every GPU of the pod that states its `gpu-memory`, in `NVIDIA_VISIBLE_DEVICES` order, so each
GPU is limited to its own share when the pod's GPUs differ in size (koordlet's one value is the
first GPU's). `prepare_host`
then does what must be true on the host first: the library is a file there (through CRI a missing
source would be created as an empty directory, and the share would silently go unenforced; koordlet,
mounting through NRI, fails the container at start instead), the lock directory exists with mode
0777 (as HAMi's device plugin creates it; CRI would create it 0755, locking out non-root
containers), and the monitor's directory is fresh.

Pure except for `prepare_host`; the GPU env hook (`agent/hooks/gpu.py`) calls both.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from agent.hooks.plugin import HookError, HookRefused
from apis.extension import names
from apis.extension.allocation import DeviceAllocation

__all__ = [
    "CONTAINER_LOCK_DIR",
    "DEFAULT_LIBRARY",
    "DEFAULT_LOCK_DIR",
    "ENV_MEMORY_LIMIT",
    "ENV_MEMORY_LIMIT_PREFIX",
    "ENV_PRELOAD",
    "ENV_SHARED_CACHE",
    "ENV_SM_LIMIT",
    "BindMount",
    "HAMiCore",
    "Isolation",
    "is_shared",
    "isolation",
    "labelled",
    "prepare_host",
    "share_limits",
]

#: koordlet's default `--hami-core-library-directory-path`, where hami-daemon installs the library.
DEFAULT_LIBRARY: Final = Path("/usr/local/vgpu/libvgpu.so")
#: The host directory koordlet mounts at `CONTAINER_LOCK_DIR`.
DEFAULT_LOCK_DIR: Final = Path("/tmp/vgpulock")
#: Where HAMi-core looks for its locks inside a container (fixed in the library).
CONTAINER_LOCK_DIR: Final = "/tmp/vgpulock"

ENV_MEMORY_LIMIT: Final = "CUDA_DEVICE_MEMORY_LIMIT"
ENV_MEMORY_LIMIT_PREFIX: Final = f"{ENV_MEMORY_LIMIT}_"
ENV_SM_LIMIT: Final = "CUDA_DEVICE_SM_LIMIT"
ENV_SHARED_CACHE: Final = "CUDA_DEVICE_MEMORY_SHARED_CACHE"
ENV_PRELOAD: Final = "LD_PRELOAD"

_WHOLE: Final = 100  # percent of one GPU
_LOCK_DIR_MODE: Final = 0o777


@dataclass(frozen=True, slots=True)
class HAMiCore:
    """Where HAMi-core is on this node, and whether its vGPU monitor is fed (the agent's flags)."""

    #: The library on the host, mounted at the same path in the container and preloaded.
    library: Path = DEFAULT_LIBRARY
    #: The host directory mounted at `CONTAINER_LOCK_DIR`.
    lock_dir: Path = DEFAULT_LOCK_DIR
    #: koordlet's `HamiCoreVGPUMonitor` gate: a per-container cache directory for HAMi's vGPU monitor.
    vgpu_monitor: bool = False

    @property
    def directory(self) -> str:
        """The library's directory (the monitor's files go under it, as in koordlet)."""
        return str(PurePosixPath(self.library).parent)


@dataclass(frozen=True, slots=True)
class BindMount:
    """A host path bind-mounted into the container (koordlet: type `bind`, options `rbind`)."""

    source: str
    destination: str


@dataclass(frozen=True, slots=True)
class Isolation:
    """What one container gets so that HAMi-core enforces its pod's GPU share."""

    envs: Mapping[str, str]
    mounts: tuple[BindMount, ...]
    #: The host directory the vGPU monitor's cache lives in (to be made fresh), or None.
    monitor_dir: str | None = None


def labelled(pod_labels: Mapping[str, str]) -> bool:
    """The pod asks for HAMi-core isolation (its label, exactly as koordlet compares it)."""
    return pod_labels.get(names.LABEL_GPU_ISOLATION_PROVIDER) == names.GPU_ISOLATION_PROVIDER_HAMI_CORE


def isolation(
    settings: HAMiCore, gpus: Sequence[DeviceAllocation], *, pod: str, pod_uid: str, container: str
) -> Isolation | None:
    """HAMi-core's setup for `container` of a labelled pod holding `gpus` (non-empty, in
    allocation order); None when the first GPU's memory ratio is 100 or more (a whole GPU needs
    no isolation). `pod` (namespace/name) names the pod in errors.

    Raises HookError when the allocation lacks what koordlet requires (the first GPU's
    `gpu-memory-ratio`, and its `gpu-memory` when shared) or, with the monitor on, when the
    pod uid or container name cannot be part of a file name.
    """
    first = gpus[0]
    ratio = first.resources.get(names.GPU_MEMORY_RATIO)
    if ratio is None:
        raise HookError(_missing(pod, first, names.GPU_MEMORY_RATIO))
    if ratio >= _WHOLE:
        return None
    memory = first.resources.get(names.GPU_MEMORY)
    if memory is None:
        raise HookError(_missing(pod, first, names.GPU_MEMORY))
    envs = {ENV_MEMORY_LIMIT: str(memory)}
    for index, gpu in enumerate(gpus):
        if names.GPU_MEMORY in gpu.resources:  # else the GPU falls back to the first's limit
            envs[f"{ENV_MEMORY_LIMIT_PREFIX}{index}"] = str(gpu.resources[names.GPU_MEMORY])
    core = first.resources.get(names.GPU_CORE)
    if core is not None:
        envs[ENV_SM_LIMIT] = str(core)
    library = str(settings.library)
    envs[ENV_PRELOAD] = library
    mounts = [BindMount(library, library), BindMount(str(settings.lock_dir), CONTAINER_LOCK_DIR)]
    if not settings.vgpu_monitor:
        return Isolation(envs, tuple(mounts))
    for part, value in (("uid", pod_uid), ("container name", container)):
        if not value or "/" in value or value in (".", ".."):
            raise HookError(f"pod {pod}: {part} {value!r} cannot name a vGPU monitor cache file")
    key = f"{pod_uid}_{container}"
    directory = settings.directory
    envs[ENV_SHARED_CACHE] = f"{directory}/{key}.cache"
    monitor_dir = f"{directory}/containers/{key}"
    mounts.append(BindMount(monitor_dir, directory))
    return Isolation(envs, tuple(mounts), monitor_dir)


def is_shared(gpus: Sequence[DeviceAllocation]) -> bool:
    """Whether any GPU is held in part (its `gpu-core` or `gpu-memory-ratio` below 100)."""
    return any(
        gpu.resources.get(name, _WHOLE) < _WHOLE for gpu in gpus for name in (names.GPU_CORE, names.GPU_MEMORY_RATIO)
    )


def share_limits(gpus: Sequence[DeviceAllocation], *, pod: str) -> dict[str, str]:
    """A share's limits in the variables HAMi-core reads, for an image that preloads it itself:
    `CUDA_DEVICE_MEMORY_LIMIT_<i>` (bytes of the i-th GPU, in `NVIDIA_VISIBLE_DEVICES` order) and
    `CUDA_DEVICE_SM_LIMIT` (the smallest `gpu-core`, equal on every GPU of a pod by the protocol).
    Raises HookError when a GPU lacks `gpu-memory` (the scheduler fills both memory forms)."""
    envs: dict[str, str] = {}
    for index, gpu in enumerate(gpus):
        memory = gpu.resources.get(names.GPU_MEMORY)
        if memory is None:
            raise HookError(
                f"pod {pod}: annotation {names.ANNOTATION_DEVICE_ALLOCATED}: shared GPU {gpu.minor} "
                f"has no {names.GPU_MEMORY} (the scheduler fills both memory forms)"
            )
        envs[f"{ENV_MEMORY_LIMIT_PREFIX}{index}"] = str(memory)
    cores = [gpu.resources[names.GPU_CORE] for gpu in gpus if names.GPU_CORE in gpu.resources]
    if cores:
        envs[ENV_SM_LIMIT] = str(min(cores))
    return envs


def prepare_host(settings: HAMiCore, setup: Isolation, *, pod: str) -> None:
    """Make the host ready for `setup`: check the library, create the lock directory (mode 0777)
    and a fresh monitor directory (mode 0777). Idempotent but for the monitor directory, which
    is emptied each time (a restarted container starts its accounting afresh, as in koordlet).

    Raises HookRefused when the library is not a file on this node (the share would not be
    enforced), HookError when a directory cannot be made.
    """
    if not settings.library.is_file():
        raise HookRefused(
            f"pod {pod}: asks for GPU isolation by {names.GPU_ISOLATION_PROVIDER_HAMI_CORE}, but its library "
            f"{settings.library} is not on this node (agent flag --hami-core-library-directory-path); "
            "its GPU share would not be enforced"
        )
    try:
        settings.lock_dir.mkdir(parents=True, exist_ok=True)
        settings.lock_dir.chmod(_LOCK_DIR_MODE)
        if setup.monitor_dir is not None:
            shutil.rmtree(setup.monitor_dir, ignore_errors=True)
            os.makedirs(setup.monitor_dir, exist_ok=True)
            os.chmod(setup.monitor_dir, _LOCK_DIR_MODE)
    except OSError as e:
        raise HookError(f"pod {pod}: cannot prepare {names.GPU_ISOLATION_PROVIDER_HAMI_CORE}'s directories: {e}") from e


def _missing(pod: str, gpu: DeviceAllocation, resource: str) -> str:
    return (
        f"pod {pod}: annotation {names.ANNOTATION_DEVICE_ALLOCATED}: GPU {gpu.minor} has no {resource}, "
        f"which {names.GPU_ISOLATION_PROVIDER_HAMI_CORE} isolation needs"
    )
