"""Pre-allocation: which running pods a Reservation with `spec.preAllocation` is placed over.

Koordinator's Reservation plugin may place such a Reservation over pods already running on a
node: their resources become the Reservation's (they are recorded as using it), so the node is
charged once for both, and when they go what they had is held for the Reservation's owners.
The rules, as Koordinator's `listPreAllocatableCandidates`, `filterWithPreAllocatablePod(s)`:

- candidates are bound pods that use no Reservation yet and are no Reservation themselves:
  in mode `Default` those matching the Reservation's owners, in mode `Cluster` those labelled
  `pod.koordinator.sh/is-pre-allocatable: "true"`, the highest
  `pod.koordinator.sh/pre-allocatable-priority` first;
- a candidate must ask for some of what the Reservation reserves, and for no more of it than the
  Reservation reserves (with `enableMultiple`, all those taken together);
- one pod is taken (the first, in order, that leaves the node room for the Reservation once its
  own requests are the Reservation's), or with `enableMultiple` pods are taken in order, skipping
  those that would overflow the Reservation, until together they make up what it reserves (or
  none is left), if the node then has room. Koordinator's manual says so ("to satisfy the
  reservation's resource requirements"); its scheduler stops at the first pods that leave the
  node room, which on a node with room to spare is one pod;
- with no such pod on a node, the Reservation is placed there on free room as any other, unless
  it carries `scheduling.koordinator.sh/pre-allocation-required: "true"`.

Pure: the plugin gives the node and its pods; the Filters then judge the node without the pods
taken (devices included), as for any pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from apis.crds.reservation import PRE_ALLOCATION_CLUSTER, Reservation
from apis.extension import names
from apis.k8s.core import Pod
from scheduler.cache import NodeInfo, PodInfo

__all__ = ["candidate", "order", "priority", "required", "select"]


def candidate(reservation: Reservation, pod: Pod) -> bool:
    """Whether the bound `pod` (using no Reservation, no reserve pod) may be pre-allocated by
    `reservation`, by its mode."""
    if reservation.pre_allocation_mode == PRE_ALLOCATION_CLUSTER:
        return pod.meta.labels.get(names.LABEL_POD_PRE_ALLOCATABLE) == "true"
    return reservation.matches_owner(pod)


def required(reservation: Reservation) -> bool:
    """Whether it may be placed only over pods (`pre-allocation-required`), never on free room."""
    return reservation.meta.labels.get(names.LABEL_PRE_ALLOCATION_REQUIRED) == "true"


def priority(pod: Pod) -> int:
    """Its `pre-allocatable-priority` (higher first); 0 when absent or not an integer."""
    try:
        return int(pod.meta.annotations.get(names.ANNOTATION_POD_PRE_ALLOCATABLE_PRIORITY, "0"))
    except ValueError:
        return 0


def order(reservation: Reservation, pods: Iterable[PodInfo]) -> list[PodInfo]:
    """`pods` in the order they are tried: the highest priority first, then (Koordinator's mode
    Default scores them; Tessera takes the tightest fit) the most of what it reserves, then by
    name."""
    reserved = reservation.reserved()

    def share(pod: PodInfo) -> float:
        return sum(min(pod.requests.get(n, 0), v) / v for n, v in reserved.items() if v)

    return sorted(pods, key=lambda p: (-priority(p.pod), -share(p), p.key))


def _within(reserved: Mapping[str, int], taken: Mapping[str, int], requests: Mapping[str, int]) -> bool:
    """Whether `requests`, added to what is `taken` already, stay within what is `reserved`, and
    ask for some of it."""
    asked = [n for n in reserved if requests.get(n)]
    return bool(asked) and all(taken.get(n, 0) + requests[n] <= reserved[n] for n in asked)


def _room(node: NodeInfo, reserved: Mapping[str, int], taken: Mapping[str, int]) -> bool:
    """Whether `node` has room for what is `reserved` once what the pods `taken` ask is free
    (the resources the node declares; the Filters judge the rest, devices included)."""
    allocatable = node.allocatable
    return all(
        allocatable[n] - node.requested.get(n, 0) + taken.get(n, 0) >= amount
        for n, amount in reserved.items()
        if n in allocatable
    )


def select(reservation: Reservation, node: NodeInfo, pods: Sequence[PodInfo]) -> tuple[PodInfo, ...]:
    """The pods of `node` (its candidates, in `order`) the Reservation is placed over there;
    empty when none fits (see the module docstring)."""
    reserved = reservation.reserved()
    if not reservation.pre_allocate_multiple:
        for pod in pods:
            if _within(reserved, {}, pod.requests) and _room(node, reserved, pod.requests):
                return (pod,)
        return ()
    taken: dict[str, int] = {}
    chosen: list[PodInfo] = []
    for pod in pods:
        if not _within(reserved, taken, pod.requests):
            continue
        for name, amount in pod.requests.items():
            taken[name] = taken.get(name, 0) + amount
        chosen.append(pod)
        if all(taken.get(n, 0) >= amount for n, amount in reserved.items()):
            break  # they make up all it reserves
    return tuple(chosen) if chosen and _room(node, reserved, taken) else ()
