"""The dashboard (`tessera dashboard`): a read-only web UI of the cluster's GPUs, pending pods,
gangs, quotas, Reservations, PodMigrationJobs and the scheduler's health, updated live through
server-sent events.

A component of its own: it imports `apis`, `kube` and `proto` only, and reaches the cluster with
the kubeconfig it is given (it has no credentials of its own). The view model is pure
(`gpumap`, `workload`, `reservations`, `migrations`, `explanation`, `health`, `snapshot`);
`sources` (informers, the scheduler's gRPC API and metrics) and `server` (HTTP, server-sent
events) are the I/O around it.
docs/user/dashboard.md is the user's guide.
"""

from __future__ import annotations

from dashboard.server import run
from dashboard.settings import DashboardSettings

__all__ = ["DashboardSettings", "run"]
