"""The resources the workload controllers read and write (declared in `kube.resources`, and
Dynamic Resource Allocation's in `apis.dra`), and which kinds own which."""

from __future__ import annotations

from typing import Final

from apis.dra import RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
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
    "COLLECTED_OWNER_KINDS",
    "CRON_JOBS",
    "DAEMON_SETS",
    "DEPLOYMENTS",
    "JOBS",
    "NODES",
    "OWNER_KINDS",
    "PODS",
    "POD_DISRUPTION_BUDGETS",
    "REPLICA_SETS",
    "RESOURCE_CLAIMS",
    "RESOURCE_CLAIM_TEMPLATES",
    "STATEFUL_SETS",
]

#: The workload kinds, which own dependents (deleted in the foreground when their owner is), by kind.
OWNER_KINDS: Final = {r.kind: r for r in (DEPLOYMENTS, REPLICA_SETS, STATEFUL_SETS, DAEMON_SETS, JOBS, CRON_JOBS)}
#: Every kind the garbage collector follows owner references to: the workloads, and pods (the
#: ResourceClaims the resourceclaim controller generates for a pod are deleted with it).
COLLECTED_OWNER_KINDS: Final = {**OWNER_KINDS, PODS.kind: PODS}
