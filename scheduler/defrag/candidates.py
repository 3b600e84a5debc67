"""Which bound pods a defragmentation plan may move, and what moving each costs.

A pod may move when something brings it back after its eviction and nothing depends on it
staying where it is:
- it has a controller (an ownerReference with `controller: true`: a ReplicaSet, a StatefulSet,
  a Job...) — a bare pod evicted is a pod lost;
- it is not in the caller's `exclude` (already migrating, refused by a safety rule), not being
  deleted, and this scheduler places it (its replacement is placed by the same code);
- it is no gang member: a gang is placed all or nothing, and moving one member alone breaks
  the placement the gang was admitted with (moving whole gangs is not planned);
- its priority is at most the pending pod's: a plan never disturbs more important work;
- its device annotation is readable (which devices it frees must be known).

Cost: fewer pods first, then the smaller ones (the GPU share they hold, then CPU), so a plan
prefers moving fractional pods over whole-GPU ones. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from apis.crds.device import DeviceType
from apis.errors import AnnotationError
from apis.extension import gang, names
from apis.k8s.core import Pod
from scheduler.cache import PodInfo

__all__ = ["Candidate", "Refusal", "gpu_percent", "refusal"]


class Refusal:
    """Why a pod may not move (for the plan's message)."""

    NO_CONTROLLER = "no controller recreates it"
    EXCLUDED = "excluded"
    DELETING = "being deleted"
    NOT_OURS = "placed by another scheduler"
    GANG = "a gang member"
    PRIORITY = "higher priority than the pending pod"
    UNKNOWN_DEVICES = "its devices are unknown"
    IN_FLIGHT = "being scheduled"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pod that may move, with its cost (lower moves first)."""

    info: PodInfo
    gpu_percent: int
    milli_cpu: int

    @property
    def cost(self) -> tuple[int, int]:
        return self.gpu_percent, self.milli_cpu


def gpu_percent(info: PodInfo) -> int:
    """Percent of one GPU the pod holds, summed over its GPUs."""
    return sum(a.resources.get(names.GPU_CORE, 0) for a in info.allocations.get(DeviceType.GPU, ()))


def refusal(info: PodInfo, pending: Pod, *, exclude: frozenset[str], served: Callable[[Pod], bool]) -> str | None:
    """Why `info`'s pod may not move to make room for `pending`; None when it may."""
    pod = info.pod
    if not any(ref.controller for ref in pod.meta.owner_references):
        return Refusal.NO_CONTROLLER
    if pod.key in exclude:
        return Refusal.EXCLUDED
    if pod.is_deleting:
        return Refusal.DELETING
    if not served(pod):
        return Refusal.NOT_OURS
    if pod.priority > pending.priority:
        return Refusal.PRIORITY
    if info.allocation_error:
        return Refusal.UNKNOWN_DEVICES
    try:
        member = gang.gang_from_pod(pod)
    except AnnotationError:
        return Refusal.GANG  # malformed gang annotations: still meant as a gang
    if member is not None:
        return Refusal.GANG
    return None
