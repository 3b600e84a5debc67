"""The resources the workload controllers read and write, and which kinds own which."""

from __future__ import annotations

from typing import Final

from apis.extension.names import GroupVersionResource
from kube.resources import NODES, PODS

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

DEPLOYMENTS: Final = GroupVersionResource("apps", "v1", "deployments", "Deployment", True)
REPLICA_SETS: Final = GroupVersionResource("apps", "v1", "replicasets", "ReplicaSet", True)
STATEFUL_SETS: Final = GroupVersionResource("apps", "v1", "statefulsets", "StatefulSet", True)
DAEMON_SETS: Final = GroupVersionResource("apps", "v1", "daemonsets", "DaemonSet", True)
JOBS: Final = GroupVersionResource("batch", "v1", "jobs", "Job", True)
CRON_JOBS: Final = GroupVersionResource("batch", "v1", "cronjobs", "CronJob", True)
POD_DISRUPTION_BUDGETS: Final = GroupVersionResource(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True
)

#: Kinds that own dependents (the garbage collector's owners), by kind.
OWNER_KINDS: Final = {r.kind: r for r in (DEPLOYMENTS, REPLICA_SETS, STATEFUL_SETS, DAEMON_SETS, JOBS, CRON_JOBS)}
