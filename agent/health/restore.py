"""Which reset-waiting GPU faults a starting agent puts back, and on which GPUs: pure rules.

`faults_in_cr` reads what a Device CR written by an earlier agent says: a GPU whose `Healthy=False`
condition names an XID that needs a reset (`Xid79`, `Xid48`, ... per agent/health/xid.py). Faults
of other kinds are not carried over: a `recover` XID ends by itself after the quiet period, and a
lasting problem (`GPULost`) is seen again by the first probe if it still holds.

`plan` matches faults to this node's GPUs by UUID — never by minor: a GPU swapped into the same
slot (or a node whose minors were renumbered) must not inherit another GPU's fault — and returns
what to restore and what to drop (faults of GPUs the node no longer has).

Which record to believe (the node's state file or the Device CR) is agent/health/memory.py's
decision; these functions only read one record.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent.discovery.model import GPU
from agent.health import xid as xids
from agent.health.tracker import ResetFault
from apis.crds.device import Device, DeviceType
from apis.extension import names

__all__ = ["Plan", "Restore", "Source", "faults_in_cr", "plan"]


class Source(enum.Enum):
    STATE_FILE = "state file"
    DEVICE_CR = "Device CR"


@dataclass(frozen=True, slots=True)
class Restore:
    """Put `fault` back on `gpu`, as found in `source`."""

    gpu: GPU
    fault: ResetFault
    source: Source


@dataclass(frozen=True, slots=True)
class Plan:
    restore: tuple[Restore, ...] = ()
    #: Faults of GPUs this node does not have (UUID, fault): forgotten.
    dropped: tuple[tuple[str, ResetFault], ...] = ()


def faults_in_cr(device: Device) -> dict[str, ResetFault]:
    """GPU UUID -> the reset-waiting fault the CR's `Healthy=False` condition names, for each GPU
    entry that has one (and a UUID)."""
    faults: dict[str, ResetFault] = {}
    for gpu in device.of_type(DeviceType.GPU):
        for condition in gpu.conditions:
            if condition.type != names.CONDITION_HEALTHY or condition.status != "False" or not gpu.id:
                continue
            xid = xids.from_reason(condition.reason)
            if xid is not None and xids.rule(xid).action is xids.XidAction.RESET:
                faults[gpu.id] = ResetFault(condition.reason, condition.message, condition.last_transition_time)
    return faults


def plan(gpus: Sequence[GPU], faults: Mapping[str, ResetFault], source: Source) -> Plan:
    """The faults of `faults` (by GPU UUID) that belong to one of `gpus`, in minor order; the rest dropped."""
    by_uuid = {g.uuid: g for g in gpus}
    restore = sorted(
        (Restore(by_uuid[uuid], fault, source) for uuid, fault in faults.items() if uuid in by_uuid),
        key=lambda r: r.gpu.minor,
    )
    dropped = sorted(((u, f) for u, f in faults.items() if u not in by_uuid), key=lambda item: item[0])
    return Plan(tuple(restore), tuple(dropped))
