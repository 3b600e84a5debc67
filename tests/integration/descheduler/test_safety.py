"""Safety under a burst of candidates, live: the eviction rate limit, the per-workload cap and a
Deployment's maxUnavailable hold while many PodMigrationJobs arrive at once.

The kube-controller-manager recreates evicted pods (ReplicaSets, Deployments); `StandIn` places
Reservations and binds pods as the scheduler would and reports them Ready as kubelet would.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from cli.launchers.descheduler import DeschedulerProcess
from cli.launchers.kubecontrollers import KubeControllersProcess
from kube.client import Client
from kube.resources import PODS
from tests.integration.descheduler.migrations import (
    RS,
    TIMEOUT,
    StandIn,
    create_job,
    create_running_pod,
    job_status,
    owner_replicaset,
)
from tests.support.cluster import unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

DEPLOYMENTS = RS.__class__("apps", "v1", "deployments", "Deployment", True)


def live_pods(client: Client, namespace: str) -> list[dict[str, Any]]:
    return [
        p for p in client.resource(PODS).list(namespace=namespace).items if not p["metadata"].get("deletionTimestamp")
    ]


def ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or ()
    )


def phases(client: Client, jobs: list[str]) -> list[str]:
    return [job_status(client, j).get("phase", "Pending") for j in jobs]


def test_evictions_never_outrun_the_token_bucket(
    client: Client, namespace: str, start_descheduler: Callable[..., DeschedulerProcess]
) -> None:
    qps, burst, n = 2.0, 2, 7
    start_descheduler(
        "--eviction-qps", str(qps), "--eviction-burst", str(burst), "--max-per-node", "0", "--max-per-namespace", "0"
    )
    for i in range(n):
        create_running_pod(client, namespace, f"p{i}", node="n1", owner=owner_replicaset(client, namespace, f"rs{i}"))
    jobs = [unique("burst") for _ in range(n)]
    for i, name in enumerate(jobs):
        create_job(client, name, namespace, f"p{i}", mode="EvictDirectly")
    gone_at: dict[str, float] = {}

    def all_gone() -> bool:
        present = {p["metadata"]["name"] for p in live_pods(client, namespace)}
        for i in range(n):
            if f"p{i}" not in present:
                gone_at.setdefault(f"p{i}", time.monotonic())
        return len(gone_at) == n

    wait_for(all_gone, timeout_s=TIMEOUT, what="every pod evicted")
    times = sorted(gone_at.values())
    for k, at in enumerate(times):  # the (k+1)-th eviction needs k+1 tokens: burst, then qps per second
        assert k + 1 <= burst + qps * (at - times[0]) + 1, f"eviction {k + 1} at +{at - times[0]:.2f}s"
    assert times[-1] - times[0] >= (n - burst - 1) / qps  # and the limit did slow them down
    wait_for(lambda: set(phases(client, jobs)) == {"Succeeded"}, timeout_s=TIMEOUT, what="all jobs to succeed")


def migrate_every_pod(
    client: Client, namespace: str, workload: tuple[Any, dict[str, Any]], replicas: int, *, ready_delay: float
) -> list[tuple[int, int]]:
    """Create `workload` (resource, object), wait for its `replicas` pods to be Ready, create a
    ReservationFirst job for each at once, and wait until all succeed; what was seen at every
    poll: (jobs Running, pods Ready)."""
    seen: list[tuple[int, int]] = []
    with StandIn(client, namespace, ready_delay=ready_delay):
        client.resource(workload[0]).create(workload[1], namespace=namespace)
        wait_for(
            lambda: sum(map(ready, live_pods(client, namespace))) == replicas, timeout_s=TIMEOUT, what="ready pods"
        )
        pods = sorted(p["metadata"]["name"] for p in live_pods(client, namespace))
        jobs = [unique("burst") for _ in pods]
        for name, pod in zip(jobs, pods, strict=True):
            create_job(client, name, namespace, pod)

        def done() -> bool:
            now = phases(client, jobs)
            seen.append((now.count("Running"), sum(map(ready, live_pods(client, namespace)))))
            return set(now) == {"Succeeded"}

        try:
            wait_for(done, timeout_s=TIMEOUT * 2, what="all migrations", poll_s=0.02)
        except AssertionError as e:  # say where each job stands
            where = {
                j: {k: job_status(client, j).get(k) for k in ("phase", "status", "reason", "message")} for j in jobs
            }
            raise AssertionError(f"{e}: {where}") from None
    return seen


@pytest.mark.scheduler_stand_in
def test_one_migration_per_workload_at_a_time_under_a_burst(
    client: Client,
    namespace: str,
    start_descheduler: Callable[..., DeschedulerProcess],
    kube_controllers: KubeControllersProcess,
) -> None:
    process = start_descheduler("--max-per-workload", "1", "--eviction-qps", "50", "--eviction-burst", "50")
    seen = migrate_every_pod(client, namespace, (RS, _replicaset("web", 4)), 4, ready_delay=0.3)
    assert max(running for running, _ in seen) == 1
    assert process.metric("tessera_descheduler_refusals_total", rule="workload") >= 3


@pytest.mark.scheduler_stand_in
def test_a_deployment_with_max_unavailable_1_never_loses_two_pods_at_once(
    client: Client,
    namespace: str,
    start_descheduler: Callable[..., DeschedulerProcess],
    kube_controllers: KubeControllersProcess,
) -> None:
    process = start_descheduler("--max-per-workload", "0", "--eviction-qps", "50", "--eviction-burst", "50")
    seen = migrate_every_pod(client, namespace, (DEPLOYMENTS, _deployment("api", 3)), 3, ready_delay=0.5)
    assert min(ready for _, ready in seen) == 2  # one at a time: never two unavailable
    assert process.metric("tessera_descheduler_refusals_total", rule="workload-unavailable") >= 1


def _template(app: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"schedulerName": "tessera-scheduler", "containers": [{"name": "c", "image": "x"}]},
    }


def _replicaset(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": _template(name)},
    }


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}}
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": _template(name)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {**spec, "strategy": strategy},
    }
