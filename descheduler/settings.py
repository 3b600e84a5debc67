"""`DeschedulerSettings`: everything `tessera descheduler` is configured with, grouped by topic.

Built from flags (and an optional YAML config file) by `cli/descheduler.py`, or by `tessera up`
directly; validated before anything starts, so a bad value is a ConfigError at start-up, never a
failure in the middle of a migration. Every default is documented in docs/user/descheduler.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from apis.errors import ConfigError
from kube.client import ClientSettings
from kube.leaderelection import LeaderElectionSettings
from kube.serving import ServingSettings

__all__ = [
    "DEFAULT_SERVING",
    "ArbitrationSettings",
    "DefragSettings",
    "DeschedulerSettings",
    "MigrationSettings",
    "ServingSettings",
]

#: Where /healthz, /readyz and /metrics are served unless `--listen` says otherwise.
DEFAULT_SERVING: Final = ServingSettings(host="0.0.0.0", port=10258)


@dataclass(frozen=True, slots=True)
class MigrationSettings:
    """How PodMigrationJobs are executed."""

    #: A job's deadline (seconds from its creation) when its `spec.ttl` is not set; Koordinator's 5m.
    default_ttl: float = 300.0
    #: How often every unfinished job is looked at even without an event (seconds).
    resync: float = 1.0
    #: The replacement Reservation's ttl: the job's remaining time plus this much, so it outlives
    #: the job's own deadline only by a margin and never holds resources for a dead job long.
    reservation_ttl_margin: float = 60.0


@dataclass(frozen=True, slots=True)
class ArbitrationSettings:
    """The safety rules every job passes before it starts and again before it evicts.

    A cap of 0 means "no limit". Namespaces: a non-empty `include` admits only those; `exclude`
    always refuses.
    """

    #: Evictions per second over the whole cluster, after a burst (a token bucket).
    eviction_qps: float = 0.5
    eviction_burst: int = 2
    max_per_node: int = 2
    max_per_namespace: int = 4
    max_per_workload: int = 1
    include_namespaces: tuple[str, ...] = ()
    exclude_namespaces: tuple[str, ...] = ("kube-system",)
    #: Evaluate jobs and report ("would migrate") but create, evict and delete nothing.
    dry_run: bool = False

    def validate(self) -> None:
        problems = []
        if self.eviction_qps <= 0:
            problems.append(f"eviction qps {self.eviction_qps:g}: must be > 0")
        if self.eviction_burst < 1:
            problems.append(f"eviction burst {self.eviction_burst}: must be >= 1")
        for name, value in (
            ("max per node", self.max_per_node),
            ("max per namespace", self.max_per_namespace),
            ("max per workload", self.max_per_workload),
        ):
            if value < 0:
                problems.append(f"{name} {value}: must be >= 0 (0: no limit)")
        both = set(self.include_namespaces) & set(self.exclude_namespaces)
        if both:
            problems.append(f"namespaces {', '.join(sorted(both))}: both included and excluded")
        if problems:
            raise ConfigError("; ".join(problems))


@dataclass(frozen=True, slots=True)
class DefragSettings:
    """The GPU defragmentation strategy: asks the scheduler's PlanMigrations for pending pods."""

    #: The scheduler's gRPC API (PlanMigrations): a unix socket path (`/run/...`, `unix:///...`)
    #: or HOST:PORT (in a cluster, the tessera-scheduler Service's grpc port); "": the strategy is off.
    scheduler_address: str = ""
    #: How often pending pods are looked at (seconds).
    interval: float = 10.0
    #: A pod must have been pending (unschedulable) this long before migrations are planned for it.
    min_pending: float = 30.0
    #: Most pods moved for one pending pod (sent as max_migrations).
    max_migrations: int = 4
    #: Only pods asking for at least this many whole GPUs get a plan.
    min_whole_gpus: int = 1

    def validate(self) -> None:
        if self.interval <= 0:
            raise ConfigError(f"defrag interval {self.interval:g}: must be > 0 seconds")
        if self.min_pending < 0:
            raise ConfigError(f"defrag min pending {self.min_pending:g}: must be >= 0 seconds")
        if self.max_migrations < 1:
            raise ConfigError(f"defrag max migrations {self.max_migrations}: must be >= 1")
        if self.min_whole_gpus < 1:
            raise ConfigError(f"defrag min whole GPUs {self.min_whole_gpus}: must be >= 1")


@dataclass(frozen=True, slots=True)
class DeschedulerSettings:
    client: ClientSettings = field(default_factory=lambda: ClientSettings(user_agent="tessera-descheduler"))
    serving: ServingSettings = DEFAULT_SERVING
    #: None: no election, this replica always works.
    leader_election: LeaderElectionSettings | None = None
    migration: MigrationSettings = field(default_factory=MigrationSettings)
    arbitration: ArbitrationSettings = field(default_factory=ArbitrationSettings)
    defrag: DefragSettings = field(default_factory=DefragSettings)

    def validate(self) -> None:
        """Raises ConfigError naming what is wrong."""
        self.serving.validate()
        if self.migration.default_ttl <= 0:
            raise ConfigError(f"--default-ttl {self.migration.default_ttl:g}: must be > 0 seconds")
        if self.migration.resync <= 0:
            raise ConfigError(f"--resync {self.migration.resync:g}: must be > 0 seconds")
        if self.leader_election is not None:
            self.leader_election.validate()
        self.arbitration.validate()
        self.defrag.validate()
