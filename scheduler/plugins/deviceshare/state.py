"""Per-cycle state of DeviceShare: the parsed request, and the devices Reserve chose."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.cache import PodInfo
from scheduler.cache.reservations import HeldReservation
from scheduler.framework.cycle_state import StateData
from scheduler.plugins.deviceshare.allocator import Allocation, PodDeviceRequest


@dataclass(frozen=True, slots=True)
class RequestState(StateData):
    """Written by PreFilter: what the pod asks for, and a key equal for pods asking the same."""

    request: PodDeviceRequest
    #: Equal for pods whose device requests, hints and workload version are equal (an id,
    #: cheap to hash): the key of the allocations DeviceShare memoises.
    shape: int
    #: Equal for pods whose device requests and hints are equal, whatever the version: whether
    #: a node fits does not depend on it (the framework's memo key).
    request_id: int = 0
    #: The learned workload's version the pod is placed by (0 without one): the score epoch.
    epoch: int = 0
    #: For a pod asking for a share of a GPU: the isolation provider its label names ("" for
    #: none); None when it asks for no GPU share (neither provider nor model rules apply).
    share_provider: str | None = None
    #: For a share that must match a GPU shared-resource template: the `<vendor>-<model>` keys
    #: with a template it matches (only their nodes take it); None when it need not match one.
    template_models: frozenset[str] | None = None
    #: Per node, the Reservation the pod may be placed onto (`NOMINATED_RESERVATIONS` as PreFilter
    #: read it; kept here so Filter and Score need no lookup per node).
    nominated: Mapping[str, HeldReservation] = field(default_factory=dict)
    #: For a Reservation placed by pre-allocation: per node, the running pods it would take over
    #: (`PRE_ALLOCATED` as PreFilter read it): their devices are the Reservation's to take.
    pre_allocated: Mapping[str, tuple[PodInfo, ...]] = field(default_factory=dict)
    #: The pod's device resources a DeviceClass serves -> the class (`scheduler.framework.extended`):
    #: on a node that serves them through DRA, DeviceShare gives nothing (DynamicResources does).
    dra: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReservedState(StateData):
    """Written by Reserve, read by PreBind: the node and the devices taken there."""

    node: str
    allocation: Allocation
