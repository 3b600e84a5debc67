"""Tessera descheduler (`tessera descheduler`; imports apis, kube and proto only, never another
component): executes PodMigrationJobs safely — ReservationFirst (reserve the replacement's
place, then evict, then confirm) or EvictDirectly — under configurable safety arbitration, and
runs strategies that create them (GPU defragmentation through the scheduler's PlanMigrations).
See docs/user/descheduler.md.
"""

from descheduler.app import run
from descheduler.settings import DeschedulerSettings

__all__ = ["DeschedulerSettings", "run"]
