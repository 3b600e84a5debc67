"""The descheduler's Prometheus metrics, on a registry of its own (served on `/metrics`):

    tessera_descheduler_migrations_total{phase}     counter: jobs that reached a phase
                                                    (Running, Succeeded, Failed, Aborted), by us
    tessera_descheduler_migrations_running          gauge: jobs Running now
    tessera_descheduler_evictions_total{result}     counter: eviction requests (ok, refused, error)
    tessera_descheduler_refusals_total{rule}        counter: arbitration refusals, by rule
    tessera_descheduler_dry_run_total               counter: jobs a dry run would have migrated
    tessera_descheduler_jobs_created_total{strategy}  counter: PodMigrationJobs a strategy created
    tessera_descheduler_strategy_runs_total{strategy}  counter: times a strategy was due and ran
    tessera_descheduler_sync_duration_seconds       histogram: one pass over every unfinished job
    tessera_descheduler_leader                      gauge: 1 while this replica works

plus `process_*`. No global registry: two descheduler in one test process do not collide.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

from descheduler.arbitration import RULES

__all__ = ["EVICTION_RESULTS", "PHASES", "Metrics"]

PHASES: Final = ("Running", "Succeeded", "Failed", "Aborted")
EVICTION_RESULTS: Final = ("ok", "refused", "error")
STRATEGIES: Final = ("defrag",)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)
        self.migrations = Counter(
            "tessera_descheduler_migrations", "PodMigrationJobs that reached a phase", ["phase"], registry=r
        )
        self.running = Gauge("tessera_descheduler_migrations_running", "PodMigrationJobs Running now", registry=r)
        self.evictions = Counter(
            "tessera_descheduler_evictions", "Eviction requests sent, by result", ["result"], registry=r
        )
        self.refusals = Counter(
            "tessera_descheduler_refusals", "Migrations held back by a safety rule", ["rule"], registry=r
        )
        self.dry_run = Counter("tessera_descheduler_dry_run", "Jobs a dry run would have migrated", registry=r)
        self.jobs_created = Counter(
            "tessera_descheduler_jobs_created", "PodMigrationJobs created by a strategy", ["strategy"], registry=r
        )
        self.strategy_runs = Counter(
            "tessera_descheduler_strategy_runs", "Times a strategy was due and ran", ["strategy"], registry=r
        )
        self.sync_duration = Histogram(
            "tessera_descheduler_sync_duration_seconds",
            "One pass over every unfinished PodMigrationJob",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0),
            registry=r,
        )
        self.leader = Gauge("tessera_descheduler_leader", "1 while this replica works", registry=r)
        for phase in PHASES:
            self.migrations.labels(phase)
        for result in EVICTION_RESULTS:
            self.evictions.labels(result)
        for rule in RULES:
            self.refusals.labels(rule)
        for strategy in STRATEGIES:
            self.jobs_created.labels(strategy)
            self.strategy_runs.labels(strategy)
