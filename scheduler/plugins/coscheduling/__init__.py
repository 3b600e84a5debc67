"""Coscheduling: gang scheduling, all or nothing (Koordinator's enhanced coscheduling)."""

from scheduler.plugins.coscheduling.plugin import NAME, Coscheduling, GangObserver, GangSummary, new

__all__ = ["NAME", "Coscheduling", "GangObserver", "GangSummary", "new"]
