"""Per-cycle state of DynamicResources: the pod's claims as PreFilter resolved them, and what
Reserve assumed for them (PreBind writes it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.dra.claim import ResourceClaim
from apis.dra.slice import NodeSelector
from apis.k8s.core import ContainerExtendedResourceRequest
from scheduler.framework.cycle_state import StateData


@dataclass(frozen=True, slots=True)
class ClaimsState(StateData):
    """Written by PreFilter for a pod with claims."""

    #: Every claim the pod uses, in spec order (pod claims the controller left out skipped).
    claims: tuple[ResourceClaim, ...]
    #: Those not allocated yet: the allocator's work, on every node.
    to_allocate: tuple[ResourceClaim, ...]
    #: Those allocated already: the pod may only go where their devices are.
    allocated: tuple[ResourceClaim, ...]
    #: Equal for pods whose claims to allocate ask for the same (their specs): the memo's key.
    shape: str
    #: `to_allocate` named by placeholders (`<claim #0>`, ...), so that an answer on a node holds
    #: for every pod of the same shape (the messages are given the pod's claims' names back).
    anonymous: tuple[ResourceClaim, ...] = ()
    #: Per claim of `allocated`, the nodes its devices are reachable from (None: every node).
    selectors: tuple[NodeSelector | None, ...] = ()
    #: The pod's extended resources a DeviceClass serves (resource, class), when its claim for
    #: them is not made yet: on a node that serves some through DRA, a claim for them is
    #: allocated with the others (`scheduler.framework.extended`).
    extended: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ReservedClaims(StateData):
    """Written by Reserve, read by PreBind: each claim before and as assumed (allocated and/or
    reserved for the pod) on `node`."""

    node: str
    changes: tuple[tuple[ResourceClaim, ResourceClaim], ...]
    #: Whether Reserve reserved GPUs for the pod in the cache (Unreserve gives them back).
    gpus: bool = False
    #: The claim for the pod's extended resources made by this cycle (PreBind creates it), and
    #: which request serves which container's resource.
    created: ResourceClaim | None = None
    mappings: tuple[ContainerExtendedResourceRequest, ...] = ()
    #: What the claims allocated for the pod charge its quota (`apis.dra.quota`); PreBind records it.
    charge: Mapping[str, int] = field(default_factory=dict)
