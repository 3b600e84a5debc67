"""NodeUnschedulable: cordoned nodes take no new pods unless the pod tolerates it."""

from scheduler.plugins.nodeunschedulable.plugin import NAME, NodeUnschedulable, new

__all__ = ["NAME", "NodeUnschedulable", "new"]
