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
from tests.support.waiting import wait_for

from .conftest import RS, TIMEOUT, StandIn, create_job, create_running_pod, job_status, owner_replicaset, unique

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


@pytest.mark.scheduler_stand_in
def test_one_migration_per_workload_at_a_time_under_a_burst(
    client: Client,
    namespace: str,
    start_descheduler: Callable[..., DeschedulerProcess],
    kube_controllers: KubeControllersProcess,
) -> None:
    process = start_descheduler("--max-per-workload", "1", "--eviction-qps", "50", "--eviction-burst", "50")
    with StandIn(client, namespace, ready_delay=0.3):
        client.resource(RS).create(_replicaset("web", 4), namespace=namespace)
        wait_for(lambda: sum(map(ready, live_pods(client, namespace))) == 4, timeout_s=TIMEOUT, what="4 pods")
        pods = sorted(p["metadata"]["name"] for p in live_pods(client, namespace))
        jobs = [unique("wl") for _ in pods]
        for name, pod in zip(jobs, pods, strict=True):
            create_job(client, name, namespace, pod)
        most = 0

        def done() -> bool:
            nonlocal most
            now = phases(client, jobs)
            most = max(most, now.count("Running"))
            return set(now) == {"Succeeded"}

        wait_for(done, timeout_s=TIMEOUT * 2, what="all migrations", poll_s=0.05)
    assert most == 1
    assert process.metric("tessera_descheduler_refusals_total", rule="workload") >= 3


@pytest.mark.scheduler_stand_in
def test_a_deployment_with_max_unavailable_1_never_loses_two_pods_at_once(
    client: Client,
    namespace: str,
    start_descheduler: Callable[..., DeschedulerProcess],
    kube_controllers: KubeControllersProcess,
) -> None:
    process = start_descheduler("--max-per-workload", "0", "--eviction-qps", "50", "--eviction-burst", "50")
    with StandIn(client, namespace, ready_delay=0.5):
        client.resource(DEPLOYMENTS).create(_deployment("api", 3), namespace=namespace)
        wait_for(lambda: sum(map(ready, live_pods(client, namespace))) == 3, timeout_s=TIMEOUT, what="3 ready pods")
        pods = sorted(p["metadata"]["name"] for p in live_pods(client, namespace))
        jobs = [unique("dep") for _ in pods]
        for name, pod in zip(jobs, pods, strict=True):
            create_job(client, name, namespace, pod)
        fewest = 3

        def done() -> bool:
            nonlocal fewest
            fewest = min(fewest, sum(map(ready, live_pods(client, namespace))))
            return set(phases(client, jobs)) == {"Succeeded"}

        wait_for(done, timeout_s=TIMEOUT * 2, what="all migrations", poll_s=0.02)
    assert fewest == 2  # one at a time: never two unavailable
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
