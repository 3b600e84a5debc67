"""What the defragmentation planner is asked and what it answers: plain values.

`PlanOptions` bounds the search (how many pods may move, which may not, how much work);
`MigrationPlan` is the answer: the node the pending pod fits on once the `migrations` are done, in
order. The live scheduler turns a plan into the `PlanMigrations` response, `tessera deschedule`
prints it, the descheduler turns it into PodMigrationJobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.errors import ConfigError

__all__ = ["DEFAULT_MAX_MIGRATIONS", "Migration", "MigrationPlan", "PlanOptions"]

#: Pods one plan may move when the caller does not say: past a handful, moving pods to fit one
#: costs more disruption than the pod is worth.
DEFAULT_MAX_MIGRATIONS = 4


@dataclass(frozen=True, slots=True)
class PlanOptions:
    #: At most this many pods moved.
    max_migrations: int = DEFAULT_MAX_MIGRATIONS
    #: Pods (`namespace/name`) the plan must not move: already migrating, refused by a safety rule.
    exclude: frozenset[str] = frozenset()
    #: Nodes whose victims are looked for with the filters, cheapest first (caps the work).
    max_nodes: int = 256
    #: Nodes whose victims' destinations are tried by scheduling them (the expensive part).
    max_targets: int = 16

    def validate(self) -> None:
        """Raises ConfigError naming every bad value."""
        problems = [
            f"{name} must be at least 1, got {value}"
            for name, value in (
                ("max_migrations", self.max_migrations),
                ("max_nodes", self.max_nodes),
                ("max_targets", self.max_targets),
            )
            if value < 1
        ]
        if problems:
            raise ConfigError("; ".join(problems))


@dataclass(frozen=True, slots=True)
class Migration:
    """Move one bound pod: its replacement fits on `to_node` given the migrations before it."""

    pod: str
    uid: str
    from_node: str
    to_node: str
    #: Percent of one GPU the pod holds, summed over its GPUs (100 per whole GPU).
    gpu_percent: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "pod": self.pod,
            "uid": self.uid,
            "fromNode": self.from_node,
            "toNode": self.to_node,
            "gpuPercent": self.gpu_percent,
        }


@dataclass(frozen=True, slots=True)
class MigrationPlan:
    """The answer for one pending pod. `feasible` with no migrations: it fits already."""

    pod: str
    feasible: bool
    #: Where the pending pod fits after the migrations (None when infeasible).
    node: str | None = None
    migrations: tuple[Migration, ...] = ()
    #: One line for people: what the plan frees, or why there is none.
    message: str = ""
    #: Nodes whose victims were checked with the filters, and whose destinations were tried.
    nodes_examined: int = 0
    targets_tried: int = 0
    #: Wall time of the search, seconds.
    seconds: float = 0.0
    #: GPUs free on `node` once the migrations are done (what the plan frees, for people).
    freed_gpus: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "pod": self.pod,
            "feasible": self.feasible,
            "node": self.node,
            "migrations": [m.to_dict() for m in self.migrations],
            "message": self.message,
            "freedGPUs": self.freed_gpus,
            "nodesExamined": self.nodes_examined,
            "targetsTried": self.targets_tried,
            "seconds": round(self.seconds, 4),
        }
