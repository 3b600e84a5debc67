"""The PodMigrationJob controller: the pure next step of a job (`steps`, over `status`), the
Reservation it creates (`reservation`) and the executor that performs steps (`executor`)."""

from descheduler.migration.executor import Executor
from descheduler.migration.steps import Facts, Step, StepKind, plan

__all__ = ["Executor", "Facts", "Step", "StepKind", "plan"]
