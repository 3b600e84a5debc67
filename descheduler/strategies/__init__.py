"""Strategies that create PodMigrationJobs (the executor runs them under the safety rules):
`defrag`, GPU defragmentation through the scheduler's PlanMigrations (`planner`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from apis.extension import names
from descheduler.metrics import Metrics
from descheduler.settings import DeschedulerSettings
from kube.client import Client
from kube.events import EventRecorder

if TYPE_CHECKING:
    from descheduler.app import Strategy

__all__ = ["from_settings"]


def from_settings(
    client: Client, settings: DeschedulerSettings, *, metrics: Metrics, events: EventRecorder
) -> list[Strategy]:
    """The strategies the settings turn on: defragmentation when a scheduler address is given."""
    from descheduler.strategies.defrag import Defragmentation
    from descheduler.strategies.planner import GrpcPlanner

    out: list[Strategy] = []
    if settings.defrag.scheduler_address:
        planner = GrpcPlanner(settings.defrag.scheduler_address)
        jobs = client.resource(names.POD_MIGRATION_JOBS)
        out.append(
            Defragmentation(
                jobs, planner, settings.defrag, metrics=metrics, events=events, arbitration=settings.arbitration
            )
        )
    return out
