"""The CronJob controller in the workload controllers, against a real API server, on a clock the
test moves: a run at its time, Forbid and Replace with a Job still running, and the Jobs going with
their CronJob. The controllers run in this process (their own API server: they act on every
namespace), every sync started by an edit, so nothing waits for a minute to turn.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cli.launchers.apiserver import run_apiserver
from kube.client import Client
from kube.resources import EVENTS, NAMESPACES
from kubecontrollers.app import KubeControllers
from kubecontrollers.cronjob import job_name
from kubecontrollers.kinds import CRON_JOBS, JOBS
from kubecontrollers.loop import Metrics
from kubecontrollers.settings import KubeControllersSettings
from tests.support.clocks import FakeClock
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0
NAMESPACE = "nightly"


@pytest.fixture
def client() -> Iterator[Client]:
    with run_apiserver() as server, server.client() as c:
        c.resource(NAMESPACES).create({"metadata": {"name": NAMESPACE}})
        yield c


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time())


@pytest.fixture
def controllers(client: Client, clock: FakeClock) -> Iterator[KubeControllers]:
    running = KubeControllers(client, KubeControllersSettings(), Metrics(), clock=clock)
    stop, synced = threading.Event(), threading.Event()
    thread = threading.Thread(target=running.run, args=(stop, synced), daemon=True)
    thread.start()
    assert synced.wait(TIMEOUT_S)
    yield running
    stop.set()
    thread.join(TIMEOUT_S)


def syncs(controllers: KubeControllers) -> float:
    return float(controllers.engine.metrics.syncs.labels("cronjob")._value.get())


def touch(client: Client, controllers: KubeControllers, **spec: Any) -> None:
    """Edit the CronJob (a label, or its spec) and wait until the controller has synced it since."""
    before = syncs(controllers)
    body: dict[str, Any] = {"metadata": {"labels": {"touched": str(time.monotonic_ns())}}}
    if spec:
        body["spec"] = spec
    client.resource(CRON_JOBS).patch("report", body, namespace=NAMESPACE)
    wait_for(lambda: syncs(controllers) > before or None, timeout_s=TIMEOUT_S, what="a sync of the CronJob")


def jobs(client: Client) -> list[str]:
    return sorted(j["metadata"]["name"] for j in client.resource(JOBS).list(namespace=NAMESPACE).items)


def test_runs_at_its_time_keeps_to_its_policy_and_goes_with_its_jobs(
    client: Client, controllers: KubeControllers, clock: FakeClock
) -> None:
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "report"},
        "spec": {
            "schedule": "*/5 * * * *",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {
                "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "x"}]}}}
            },
        },
    }
    made = client.resource(CRON_JOBS).create(cronjob, namespace=NAMESPACE)
    created = datetime.datetime.fromisoformat(made["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    first = created.replace(second=0) + datetime.timedelta(minutes=5 - created.minute % 5)
    touch(client, controllers)
    assert jobs(client) == [], "a Job before the schedule's first time"

    clock.now = first.timestamp() + 30
    touch(client, controllers)
    name = job_name("report", first)
    wait_for(lambda: jobs(client) == [name] or None, timeout_s=TIMEOUT_S, what=f"the Job {name}")
    job = client.resource(JOBS).get(name, namespace=NAMESPACE)
    assert job["metadata"]["ownerReferences"][0]["uid"] == made["metadata"]["uid"]
    assert job["spec"]["selector"]["matchLabels"] == {"batch.kubernetes.io/controller-uid": job["metadata"]["uid"]}

    def recorded() -> dict[str, Any] | None:
        status: dict[str, Any] = client.resource(CRON_JOBS).get("report", namespace=NAMESPACE)["status"]
        active = status.get("active") or []
        return status if [(r["name"], r.get("uid")) for r in active] == [(name, job["metadata"]["uid"])] else None

    status = wait_for(recorded, timeout_s=TIMEOUT_S, what="status.active with the Job's uid")
    assert status["lastScheduleTime"] == first.strftime("%Y-%m-%dT%H:%M:%SZ")

    # Five minutes on, the Job still runs (no kubelet here): Forbid skips the time, and says so.
    clock.now += 300
    touch(client, controllers)

    def skipped() -> list[dict[str, Any]] | None:
        found = client.resource(EVENTS).list(namespace=NAMESPACE, field_selector="involvedObject.name=report").items
        return [e for e in found if e["reason"] == "JobAlreadyActive"] or None

    wait_for(skipped, timeout_s=TIMEOUT_S, what="a JobAlreadyActive Event")
    assert jobs(client) == [name]

    # Replace: the running Job goes, the time's own comes.
    touch(client, controllers, concurrencyPolicy="Replace")
    second = job_name("report", first + datetime.timedelta(minutes=5))
    wait_for(lambda: jobs(client) == [second] or None, timeout_s=TIMEOUT_S, what=f"{name} replaced by {second}")

    # The CronJob deleted (kubectl's default, background): the garbage collector takes its Jobs.
    client.resource(CRON_JOBS).delete("report", namespace=NAMESPACE, propagation_policy="Background")
    wait_for(lambda: jobs(client) == [] or None, timeout_s=TIMEOUT_S, what="the CronJob's Jobs to be deleted")
