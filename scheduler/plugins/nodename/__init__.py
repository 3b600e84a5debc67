"""NodeName: a pod that names its node (`spec.nodeName`) fits only there."""

from scheduler.plugins.nodename.plugin import NAME, NodeName, new

__all__ = ["NAME", "NodeName", "new"]
