"""TaintToleration: a pod goes only where it tolerates the node's NoSchedule/NoExecute taints,
and prefers nodes with fewer PreferNoSchedule taints it does not tolerate."""

from scheduler.plugins.tainttoleration.plugin import NAME, TaintToleration, new

__all__ = ["NAME", "TaintToleration", "new"]
