"""Who holds which device: the bound pods' `device-allocated` annotations, one row per device.

The invariants recompute this from the API server's objects alone, independently of the
scheduler's cache, so a bookkeeping bug in the scheduler cannot hide itself. A pod holds its
devices from binding until it is gone from the API server (a pod being deleted still holds them:
its containers may still run); a Succeeded or Failed pod holds nothing. A Reservation holds its
devices (its own `device-allocated` annotation) while Available and not being used by an owner:
once an owner is bound onto it (the owner's `reservation-allocated` annotation), the owner holds
them instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from apis.crds.device import DeviceType
from apis.crds.reservation import Reservation, allocated_from_pod
from apis.errors import AnnotationError
from apis.extension import allocation
from apis.k8s.core import Pod

__all__ = ["Holding", "holding_reservations", "holdings", "reservation_holdings"]


@dataclass(frozen=True, slots=True)
class Holding:
    pod: str
    node: str
    type: DeviceType
    minor: int
    resources: Mapping[str, int] = field(default_factory=dict)
    #: RDMA: the virtual functions (their minors) the pod holds on this NIC.
    vfs: tuple[int, ...] = ()

    @property
    def device(self) -> str:
        """`node/gpu-3`: how a violation names the device."""
        return f"{self.node}/{self.type.value}-{self.minor}"


def holdings(pods: Iterable[Pod]) -> tuple[list[Holding], dict[str, str]]:
    """Every device each bound, non-terminal pod holds; and, by pod, annotations that do not parse."""
    held: list[Holding] = []
    malformed: dict[str, str] = {}
    for pod in pods:
        if not pod.node_name or pod.is_terminal:
            continue
        try:
            allocated = allocation.from_pod_annotations(pod.annotations, obj=pod.key)
        except AnnotationError as e:
            malformed[pod.key] = str(e)
            continue
        for dtype, allocations in allocated.items():
            held += [
                Holding(pod.key, pod.node_name, dtype, a.minor, dict(a.resources), tuple(vf.minor for vf in a.vfs))
                for a in allocations
            ]
    return held, malformed


def holding_reservations(
    reservations: Iterable[Reservation], pods: Iterable[Pod], *, also: Iterable[Reservation] = ()
) -> list[Reservation]:
    """The placed Reservations that hold their resources (Available) and that no bound, unfinished
    pod is using; `also` adds those that held in another listing (the union errs towards "held")."""
    using: set[str] = set()
    for pod in pods:
        if not pod.node_name or pod.is_terminal:
            continue
        try:
            allocated = allocated_from_pod(pod)
        except AnnotationError:
            continue  # `device-unknown` and the reservation family report it
        if allocated is not None:
            using.add(allocated.uid or allocated.name)
    out: dict[str, Reservation] = {}
    for r in (*reservations, *also):
        if r.phase.holds_resources and r.node_name and r.uid not in using and r.name not in using:
            out.setdefault(r.uid, r)
    return list(out.values())


def reservation_holdings(reservations: Iterable[Reservation]) -> list[Holding]:
    """What `reservations` hold, each named `reservation/NAME` (their annotations always parse:
    a Reservation whose does not is skipped, as the scheduler cannot have placed it)."""
    held: list[Holding] = []
    for r in reservations:
        rows, _ = holdings([r.reserve_pod()])
        held += [replace(h, pod=f"reservation/{r.name}") for h in rows]
    return held
