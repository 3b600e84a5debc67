"""The device ledger's plain data: what this node has, what a pod claims, what collides.

Frozen values with no I/O, so the collision check (`check.py`) is a plain function over them and
tests build them by hand. `NodeSlots.of` turns what the agent knows — the discovery inventory and
the health tracker's snapshot — into the capacity the check counts against:

- a GPU offers 100 % of its compute (`gpu-core`) and its total memory in bytes;
- an RDMA physical function offers `koordinator.sh/rdma: 100` (100 = the whole device, 1 = one
  virtual function) and each of its virtual functions once.

A device the tracker says is unhealthy keeps its capacity (pods that held it before the fault
still count) but carries the fault, so new pods are refused on it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from apis.crds.device import DeviceType
from apis.extension.allocation import DeviceAllocations

if TYPE_CHECKING:  # read, never built here: the hook server's imports stay free of NVML and discovery
    from agent.discovery.model import Inventory
    from agent.health.tracker import Health

__all__ = ["Claim", "Collision", "CollisionKind", "GPUSlot", "NodeSlots", "RDMASlot"]


@dataclass(frozen=True, slots=True)
class GPUSlot:
    """One GPU of this node, as the ledger counts it."""

    minor: int
    uuid: str
    memory_bytes: int
    #: Why the GPU is unhealthy (`Xid79: GPU has fallen off the bus`); "" while it is healthy.
    fault: str = ""

    @property
    def healthy(self) -> bool:
        return not self.fault


@dataclass(frozen=True, slots=True)
class RDMASlot:
    """One RDMA physical function of this node (its VFs are given out once each)."""

    minor: int
    bus_id: str
    fault: str = ""

    @property
    def healthy(self) -> bool:
        return not self.fault


@dataclass(frozen=True, slots=True)
class NodeSlots:
    """Everything a claim on this node is counted against, by device minor."""

    node: str
    gpus: Mapping[int, GPUSlot]
    rdma: Mapping[int, RDMASlot]

    @classmethod
    def of(cls, inventory: Inventory, health: Mapping[str, Health], *, node: str) -> NodeSlots:
        """The node's capacity from a discovery inventory and `HealthTracker.snapshot()` (keyed by
        the device's CR id, GPU UUID or RDMA bus id; a device missing from it is healthy)."""
        return cls(
            node=node,
            gpus={
                g.minor: GPUSlot(g.minor, g.uuid, g.memory_bytes, _fault(health.get(g.uuid))) for g in inventory.gpus
            },
            rdma={r.minor: RDMASlot(r.minor, r.bus_id, _fault(health.get(r.bus_id))) for r in inventory.rdma},
        )


def _fault(health: Health | None) -> str:
    if health is None or health.healthy:
        return ""
    reason = health.reason or "Unhealthy"
    return f"{reason}: {health.message}" if health.message else reason


@dataclass(frozen=True, slots=True)
class Claim:
    """The devices one pod holds, or asks for, on this node (its `device-allocated` annotation)."""

    #: The pod's identity: its UID (`namespace/name` where no UID is known).
    key: str
    #: `namespace/name`, for people.
    pod: str
    devices: DeviceAllocations


class CollisionKind(enum.Enum):
    """Why a claim cannot be admitted; the value is the metric's `reason` label."""

    #: The shares on one device would add up to more than it has.
    OVERCOMMITTED = "overcommitted"
    #: An RDMA virtual function another pod already holds.
    VF_TAKEN = "vf_taken"
    #: The device is unhealthy and the pod did not hold it before the fault.
    UNHEALTHY = "unhealthy"
    #: The node has no device with that minor.
    UNKNOWN_DEVICE = "unknown_device"


@dataclass(frozen=True, slots=True)
class Collision:
    """One device a claim cannot have, with the sentence that says why."""

    kind: CollisionKind
    type: DeviceType
    minor: int
    #: The pods (`namespace/name`) that hold the device, sorted; empty when none is to blame.
    holders: tuple[str, ...]
    #: `GPU 0 (GPU-…) of node sim-1 is already held by ns/a (50% core, 40Gi): ns/x asks for …`.
    message: str
