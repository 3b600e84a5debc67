"""NodeResourcesFit: CPU, memory, pod count and extended resources must fit the node."""

from scheduler.plugins.noderesources.args import NodeResourcesFitArgs
from scheduler.plugins.noderesources.plugin import NAME, NodeResourcesFit, new

__all__ = ["NAME", "NodeResourcesFit", "NodeResourcesFitArgs", "new"]
