"""DefaultPreemption: kube-scheduler's priority-based preemption across the cluster."""

from scheduler.plugins.defaultpreemption.plugin import NAME, DefaultPreemption, new

__all__ = ["NAME", "DefaultPreemption", "new"]
