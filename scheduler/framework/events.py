"""The framework's cluster events: what the scheduler's own feeds (nodes, Devices, pods) and its
binding say happened, each named for what happened.

The queue moves a pod that waits in the unschedulable queue when an event concerns one of the
plugins that rejected it (`EnqueueExtension.events_to_register`: resource and action). Events
that free room a pod held — an assigned pod deleted, a binding undone, a pod held at Permit
rejected — are all pod deletions to those plugins, so each waits for all of them by
registering (Pod, Delete) once; their labels tell them apart in logs and in
`tessera_scheduler_queue_incoming_pods_total{event}`. A plugin's own events (a quota changed, a
Reservation placed, a PodGroup changed) are defined by the plugin and emitted through its feeds
(`scheduler.framework.feeds`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "ASSIGNED_POD_DELETED",
    "ASSIGNED_POD_RECORD_CHANGED",
    "BINDING_UNDONE",
    "DEVICE_ADDED",
    "DEVICE_CHANGED",
    "NODE_ADDED",
    "NODE_CHANGED",
    "POD_ADDED",
    "WAITING_POD_REJECTED",
    "ClusterEvent",
    "EventAction",
    "EventResource",
]


class EventResource:
    """What a cluster event is about: the framework's own kinds. The vocabulary is open — a
    plugin names the resources of its own events (`"ElasticQuota"`, `"Reservation"`), with the
    API kind's name where there is one."""

    POD: Final = "Pod"
    NODE: Final = "Node"
    DEVICE: Final = "Device"


class EventAction(enum.Flag):
    ADD = enum.auto()
    UPDATE = enum.auto()
    DELETE = enum.auto()
    ALL = ADD | UPDATE | DELETE


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A change in the cluster that may make a pod a plugin rejected fit: what it is about and
    how (what a plugin registers interest in, `EnqueueExtension`, and what the queue matches),
    and what happened, in words (`label`, for logs and metrics; not compared: two events that
    differ only in their label concern the same plugins). The framework's events are in
    `scheduler.framework.events`; a plugin defines its own the same way."""

    resource: str
    action: EventAction
    label: str = field(default="", compare=False)


NODE_ADDED: Final = ClusterEvent(EventResource.NODE, EventAction.ADD, "NodeAdd")
#: What of a Node can change whether pods fit changed (allocatable, labels, taints, ...).
NODE_CHANGED: Final = ClusterEvent(EventResource.NODE, EventAction.UPDATE, "NodeUpdate")
DEVICE_ADDED: Final = ClusterEvent(EventResource.DEVICE, EventAction.ADD, "DeviceAdd")
#: A node's devices changed (health, resources, topology).
DEVICE_CHANGED: Final = ClusterEvent(EventResource.DEVICE, EventAction.UPDATE, "DeviceUpdate")
#: A pod appeared (a new member may complete its gang).
POD_ADDED: Final = ClusterEvent(EventResource.POD, EventAction.ADD, "PodAdd")
#: An assigned pod's record of what it holds changed (fixed, edited, broken).
ASSIGNED_POD_RECORD_CHANGED: Final = ClusterEvent(EventResource.POD, EventAction.UPDATE, "AssignedPodHoldingsUpdate")
#: An assigned pod left (deleted, or finished): what it held is free.
ASSIGNED_POD_DELETED: Final = ClusterEvent(EventResource.POD, EventAction.DELETE, "AssignedPodDelete")
#: A pod's binding failed and was undone: what its cycle reserved is free again.
BINDING_UNDONE: Final = ClusterEvent(EventResource.POD, EventAction.DELETE, "BindingUndone")
#: Pods held at Permit were rejected (a gang that cannot complete, a timeout): what they held is free.
WAITING_POD_REJECTED: Final = ClusterEvent(EventResource.POD, EventAction.DELETE, "WaitingPodRejected")
