"""What a pod is charged against its quota: `apis.extension.quotacount` applied to a Pod.

The table of how each resource spelling counts lives in `quotacount`; this module only brings
the pod's side of it: its effective request, and for GPU memory asked in bytes the ratio its
`device-allocated` annotation says it was given once it is bound — plus what its ResourceClaims'
allocations charge (`apis.dra.quota`), as recorded on the pod; `claims` (the scheduler's Reserve,
which allocates them) says it before the record is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.crds.device import DeviceType
from apis.dra import quota as claims_quota
from apis.errors import AnnotationError
from apis.extension import allocation, names, quotacount
from apis.k8s import resources
from apis.k8s.core import Pod

__all__ = ["Charge", "charge_of"]


@dataclass(frozen=True, slots=True)
class Charge:
    """A pod's charge (counted names, base units). `estimated`: its GPU memory ratio is an
    estimate from the smallest GPU, to be redone when that changes."""

    amounts: dict[str, int]
    estimated: bool = False


def charge_of(
    pod: Pod,
    requests: Mapping[str, int] | None = None,
    *,
    gpu_memory: int = 0,
    claims: Mapping[str, int] | None = None,
) -> Charge:
    """The pod's charge. `requests`: its effective request when the caller has it (else
    `pod.requests()`); `gpu_memory`: bytes of the cluster's smallest GPU (`Capacity.gpu_memory`);
    `claims`: what its claims charge (else its record, `ANNOTATION_CLAIMS_QUOTA_CHARGE`)."""
    asked = pod.requests() if requests is None else requests
    held = _claims(pod) if claims is None else dict(claims)
    if not quotacount.estimates_memory_ratio(asked):
        return Charge(_with(quotacount.pod_charge(asked), held))
    given = _allocated_ratio(pod) if pod.node_name else None
    amounts = quotacount.pod_charge(asked, allocated_ratio=given, gpu_memory=gpu_memory)
    return Charge(_with(amounts, held), estimated=given is None)


def _with(amounts: dict[str, int], claims: Mapping[str, int]) -> dict[str, int]:
    return resources.add(amounts, claims) if claims else amounts


def _claims(pod: Pod) -> dict[str, int]:
    """The claims' charge the pod's record says; a record that cannot be read charges nothing
    (only the scheduler writes it, with the binding)."""
    try:
        return claims_quota.decode(pod.annotations, obj=pod.key)
    except AnnotationError:
        return {}


def _allocated_ratio(pod: Pod) -> int | None:
    """The GPU memory ratio the pod's allocation gives it; None without a readable one."""
    try:
        given = allocation.from_pod_annotations(pod.annotations, obj=pod.key)
    except AnnotationError:
        return None
    gpus = given.get(DeviceType.GPU)
    if not gpus:
        return None
    return sum(gpu.resources.get(names.GPU_MEMORY_RATIO, 0) for gpu in gpus)
