"""The soak's workload controllers' share: a few Deployments rolled out now and then, and short Jobs.

Nobody runs bare pods, so the soak also drives what `tessera kube-controller-manager` turns into
pods: `DEPLOYMENTS` Deployments of fractional-GPU replicas (RollingUpdate, maxSurge 1,
maxUnavailable 0 — a rollout may add one pod at a time, never take a ready one away — but 1 for
`MAX_UNAVAILABLE`'s, which the PodMigrationJobs can therefore move, `migrating.py`), whose pod
template gets a new annotation every `ROLLOUT_EVERY_S` on one of them (a rollout, so surge is
exercised while components die), and a Job every `JOB_EVERY_S` whose one quarter-GPU pod the
simulated kubelet ends after `JOB_RUN_S` seconds. A Job seen complete is deleted `JOB_KEEP_S`
later with its pods (Background propagation). The invariants over them are in
`invariants/workloads.py`; they read the objects from the API server, not from here.

Requests that fail (the API server or the controller manager is being restarted) are retried on
the next tick: a rollout or a Job more or less does not matter, a lost object would.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Final

from apis.errors import TesseraError
from apis.extension import names
from cli.bench.soak.tolerations import lost_node_tolerations
from cli.bench.soak.workload import NAMESPACE
from kube import errors
from kube.client import Client
from kube.resources import DEPLOYMENTS as DEPLOYMENT_RESOURCE
from kube.resources import JOBS as JOB_RESOURCE

__all__ = ["DEPLOYMENTS", "GPUS_RESERVED", "JOB_RUN_S", "Apps", "deployment_manifest", "job_manifest"]

log = logging.getLogger(__name__)

#: (name, replicas): each replica asks for a quarter GPU.
DEPLOYMENTS: Final = (("infer-a", 2), ("infer-b", 3), ("infer-c", 1))
#: maxUnavailable where not 0: the descheduler migrates a Deployment's pod only when its eviction
#: keeps the Deployment within maxUnavailable (`descheduler/arbitration`), so only these move.
MAX_UNAVAILABLE: Final = {"infer-b": 1}
ROLLOUT_EVERY_S: Final = 20.0
JOB_EVERY_S: Final = 8.0
JOB_RUN_S: Final = 3
JOB_KEEP_S: Final = 10.0
_QUARTER: Final = {names.GPU_CORE: "25", names.GPU_MEMORY_RATIO: "25"}
#: GPUs the Deployments (replicas + surge) and the Jobs may hold at once: kept out of the pods' budget.
GPUS_RESERVED: Final = 0.25 * sum(replicas + 1 for _, replicas in DEPLOYMENTS) + 0.5
_TICK_S: Final = 1.0
_LABELS: Final = {"app.kubernetes.io/part-of": "tessera-soak"}


def _pod_spec(restart_policy: str, toleration_s: float) -> dict[str, Any]:
    requests = {names.CPU: "10m", names.MEMORY: "16Mi", **_QUARTER}
    container = {"name": "main", "image": "soak", "resources": {"requests": requests, "limits": dict(requests)}}
    return {
        "schedulerName": names.SCHEDULER_NAME,
        "restartPolicy": restart_policy,
        "containers": [container],
        "tolerations": lost_node_tolerations(toleration_s),
    }


def deployment_manifest(name: str, replicas: int, toleration_s: float, max_unavailable: int = 0) -> dict[str, Any]:
    """`toleration_s`: how long its pods tolerate a lost node (`tolerations.py`)."""
    labels = {**_LABELS, "app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": dict(_LABELS)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": max_unavailable}},
            "template": {"metadata": {"labels": labels}, "spec": _pod_spec("Always", toleration_s)},
        },
    }


def job_manifest(name: str, toleration_s: float) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": dict(_LABELS)},
        "spec": {
            "backoffLimit": 2,
            "template": {
                "metadata": {
                    "labels": {**_LABELS, "job": name},
                    "annotations": {names.ANNOTATION_SIMULATED_RUN_SECONDS: str(JOB_RUN_S)},
                },
                "spec": _pod_spec("Never", toleration_s),
            },
        },
    }


def is_complete(job: dict[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions)


class Apps:
    """See the module docstring; `run` until `stop` (from its own thread)."""

    def __init__(self, client: Client, *, seed: int, toleration_s: float) -> None:
        """`toleration_s`: how long their pods tolerate a lost node (`tolerations.py`)."""
        self._toleration_s = toleration_s
        self._deployments = client.resource(DEPLOYMENT_RESOURCE)
        self._jobs = client.resource(JOB_RESOURCE)
        self._rng = random.Random(f"apps-{seed}")
        self._stop = threading.Event()
        self._serial = 0
        #: Job name → when it was first seen complete.
        self._complete_at: dict[str, float] = {}
        self.rollouts = 0
        self.jobs_created = 0
        self.jobs_completed = 0

    def setup(self) -> None:
        """The Deployments (idempotent)."""
        for name, replicas in DEPLOYMENTS:
            try:
                manifest = deployment_manifest(name, replicas, self._toleration_s, MAX_UNAVAILABLE.get(name, 0))
                self._deployments.create(manifest, namespace=NAMESPACE)
            except errors.AlreadyExists:
                continue

    def run(self) -> None:
        next_rollout = time.time() + self._rng.uniform(0.5, 1.5) * ROLLOUT_EVERY_S
        next_job = time.time() + self._rng.uniform(0.5, 1.5) * JOB_EVERY_S
        while not self._stop.wait(_TICK_S):
            try:
                if time.time() >= next_rollout:
                    self._roll_out(self._rng.choice(DEPLOYMENTS)[0])
                    next_rollout = time.time() + self._rng.uniform(0.5, 1.5) * ROLLOUT_EVERY_S
                if time.time() >= next_job:
                    self._create_job()
                    next_job = time.time() + self._rng.uniform(0.5, 1.5) * JOB_EVERY_S
                self._delete_completed_jobs()
            except (errors.APIError, OSError, TesseraError) as e:  # being restarted: next tick
                log.info("Workload request failed; retrying", extra={"error": str(e)})

    def stop(self) -> None:
        self._stop.set()

    def _roll_out(self, name: str) -> None:
        self.rollouts += 1
        patch = {"spec": {"template": {"metadata": {"annotations": {"soak.tessera.dev/rollout": str(self.rollouts)}}}}}
        self._deployments.patch(name, patch, namespace=NAMESPACE)

    def _create_job(self) -> None:
        self._serial += 1
        self._jobs.create(job_manifest(f"train-{self._serial}", self._toleration_s), namespace=NAMESPACE)
        self.jobs_created += 1

    def _delete_completed_jobs(self) -> None:
        now = time.time()
        for job in self._jobs.list(namespace=NAMESPACE).items:
            name = job["metadata"]["name"]
            if not is_complete(job):
                continue
            if name not in self._complete_at:
                self._complete_at[name] = now
                self.jobs_completed += 1
            elif now >= self._complete_at[name] + JOB_KEEP_S:
                try:
                    self._jobs.delete(name, namespace=NAMESPACE, propagation_policy="Background")
                except errors.NotFound:
                    continue
