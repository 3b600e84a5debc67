"""NodeAffinity: `nodeSelector` and required node affinity filter; preferred affinity scores."""

from scheduler.plugins.nodeaffinity.plugin import NAME, NodeAffinity, new

__all__ = ["NAME", "NodeAffinity", "new"]
