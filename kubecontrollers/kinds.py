"""The resources the workload controllers read and write (declared in `kube.resources`), and which
kinds own which."""

from __future__ import annotations

from typing import Final

from kube.resources import (
    CRON_JOBS,
    DAEMON_SETS,
    DEPLOYMENTS,
    JOBS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    REPLICA_SETS,
    STATEFUL_SETS,
)

__all__ = [
    "CRON_JOBS",
    "DAEMON_SETS",
    "DEPLOYMENTS",
    "JOBS",
    "NODES",
    "OWNER_KINDS",
    "PODS",
    "POD_DISRUPTION_BUDGETS",
    "REPLICA_SETS",
    "STATEFUL_SETS",
]

#: Kinds that own dependents (the garbage collector's owners), by kind.
OWNER_KINDS: Final = {r.kind: r for r in (DEPLOYMENTS, REPLICA_SETS, STATEFUL_SETS, DAEMON_SETS, JOBS, CRON_JOBS)}
