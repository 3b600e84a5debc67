"""GPU defragmentation: which bound pods to move, and where, so that a pending pod fits.

An offline entry point of the scheduler, like `whatif` and `simulation`: plain data in (a
`Scheduler` over a cluster cache, a pending pod), a `MigrationPlan` out. The live scheduler
serves it as the gRPC `PlanMigrations` (on a copy of its cache), `tessera deschedule` prints it,
`tessera simulate --defrag` measures it on the trace, and the descheduler executes it.

- `plan`: the data — `PlanOptions`, `Migration`, `MigrationPlan`;
- `candidates`: which pods may move and what moving each costs;
- `planner`: the search (`plan`).
"""

from scheduler.defrag.plan import DEFAULT_MAX_MIGRATIONS, Migration, MigrationPlan, PlanOptions
from scheduler.defrag.planner import plan

__all__ = ["DEFAULT_MAX_MIGRATIONS", "Migration", "MigrationPlan", "PlanOptions", "plan"]
