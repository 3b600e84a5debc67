"""The soak's PodMigrationJobs: the Deployments' pods moved now and then, while components die.

Every `MIGRATE_EVERY_S` (jittered as the kills) one bound, ready Deployment pod (`apps.DEPLOYMENTS`)
that no unfinished job of the soak's already moves gets a PodMigrationJob with `spec.ttl` `TTL_S`:
ReservationFirst mostly (the descheduler reserves room for the replacement, owned by the pod's
ReplicaSet, evicts once it is Available, and succeeds when the ReplicaSet's new pod is placed onto
it), EvictDirectly at times; mostly of the Deployment whose maxUnavailable lets one pod go
(`apps.MAX_UNAVAILABLE`), the others' held back until their ttl. The descheduler executes them under
its arbitration (one migration per workload at a time, an eviction rate), and may create jobs of its
own for GPU defragmentation. The invariants over them are in `invariants/migrations.py`; they read
the jobs from the API server. A create that fails (the API server is being restarted) is not
retried: a migration more or less does not matter.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import Counter
from typing import Any, Final

from apis.crds.podmigrationjob import MigrationMode, MigrationPhase, PodMigrationJob
from apis.errors import TesseraError
from apis.extension import names
from apis.k8s.core import Pod
from cli.bench.soak.apps import DEPLOYMENTS, MAX_UNAVAILABLE
from cli.bench.soak.workload import NAMESPACE
from kube import errors, resources
from kube.client import Client

__all__ = ["MIGRATE_EVERY_S", "TTL_S", "Migrating", "migration_manifest"]

log = logging.getLogger(__name__)

MIGRATE_EVERY_S: Final = 12.0
TTL_S: Final = 90.0
#: The share of EvictDirectly jobs.
EVICT_DIRECTLY: Final = 0.25
#: The share of jobs for a Deployment that may lose a pod (`apps.MAX_UNAVAILABLE`); the others'
#: jobs are held back by the descheduler's arbitration until they fail at their ttl.
MOVABLE_DEPLOYMENTS: Final = 0.75


def migration_manifest(name: str, pod: Pod, mode: MigrationMode) -> dict[str, Any]:
    return {
        "apiVersion": f"{names.SCHEDULING_DOMAIN}/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "tessera-soak"}},
        "spec": {
            "podRef": {"namespace": pod.meta.namespace, "name": pod.meta.name, "uid": pod.meta.uid},
            "mode": mode.value,
            "ttl": f"{TTL_S:g}s",
        },
    }


def _movable(pod: Pod) -> bool:
    if pod.meta.labels.get("app") not in {name for name, _ in DEPLOYMENTS}:
        return False
    ready = any(c.type == "Ready" and c.status == "True" for c in pod.conditions)
    return bool(pod.node_name) and ready and not pod.is_deleting and not pod.is_terminal


class Migrating:
    """See the module docstring; `run` until `stop` (from its own thread)."""

    def __init__(self, client: Client, *, seed: int) -> None:
        self._jobs = client.resource(names.POD_MIGRATION_JOBS)
        self._pods = client.resource(resources.PODS)
        self._rng = random.Random(f"migrations-{seed}")
        self._stop = threading.Event()
        self._serial = 0
        self.created: Counter[str] = Counter()

    def run(self) -> None:
        while not self._stop.wait(self._rng.uniform(0.5, 1.5) * MIGRATE_EVERY_S):
            self.migrate_one()

    def stop(self) -> None:
        self._stop.set()

    def migrate_one(self) -> str | None:
        """Create one job for a random movable Deployment pod; its name, or None."""
        try:
            listed = self._pods.list_all(namespace=NAMESPACE).items
            jobs = [PodMigrationJob.from_dict(j) for j in self._jobs.list_all().items]
        except (errors.APIError, OSError, TesseraError) as e:
            log.info("Listing for a migration failed", extra={"error": str(e)})
            return None
        moving = {j.pod_ref.uid for j in jobs if not j.phase.terminal}
        pods = [p for p in (Pod.from_dict(raw) for raw in listed) if _movable(p) and p.meta.uid not in moving]
        if not pods:
            return None
        movable = [p for p in pods if p.meta.labels.get("app") in MAX_UNAVAILABLE]
        if movable and self._rng.random() < MOVABLE_DEPLOYMENTS:
            pods = movable
        pod = self._rng.choice(sorted(pods, key=lambda p: p.key))
        mode = MigrationMode.EVICT_DIRECTLY if self._rng.random() < EVICT_DIRECTLY else MigrationMode.RESERVATION_FIRST
        self._serial += 1
        name = f"soak-move-{self._serial}"
        try:
            self._jobs.create(migration_manifest(name, pod, mode))
        except errors.APIError as e:
            log.info("Migration create failed", extra={"job": name, "error": str(e)})
            return None
        self.created[mode.value] += 1
        return name

    def phases(self) -> Counter[str]:
        """Every PodMigrationJob now (the descheduler's own included) by phase; empty if unlistable."""
        try:
            return Counter(
                str((j.get("status") or {}).get("phase") or MigrationPhase.PENDING.value)
                for j in self._jobs.list_all().items
            )
        except (errors.APIError, OSError):
            return Counter()
