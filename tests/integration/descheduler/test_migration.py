"""PodMigrationJobs executed live: API server and descheduler processes over real HTTP.

A ReservationFirst migration creates its Reservation, never evicts before the Reservation is
Available, evicts through the Eviction API, and succeeds once the replacement is bound onto the
Reservation. Bad jobs get a clear status; a dry run evicts nothing; kill -9 mid-migration
resumes from the API objects with nothing lost or duplicated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from apis.extension import names
from cli.launchers.descheduler import DeschedulerProcess
from descheduler.arbitration import Arbiter
from descheduler.cluster import BY_NAMESPACE, Cluster
from descheduler.metrics import Metrics
from descheduler.migration import Executor
from descheduler.settings import ArbitrationSettings, MigrationSettings
from kube.cache import Store
from kube.client import Client
from kube.events import EventRecorder
from kube.resources import EVENTS
from tests.integration.descheduler.migrations import (
    TIMEOUT,
    conditions,
    create_job,
    create_running_pod,
    job_status,
    make_available,
    owner_replicaset,
    place_replacement,
    pod_exists,
    reservation,
)
from tests.support.cluster import unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def reserving(client: Client, namespace: str, app: str) -> tuple[dict[str, Any], str]:
    """A pod `APP-1` of a ReplicaSet, and a ReservationFirst job for it, once its Reservation
    exists: (the pod's controller reference, the job's name)."""
    owner = owner_replicaset(client, namespace, app)
    create_running_pod(client, namespace, f"{app}-1", node="n-old", owner=owner)
    name = unique(app)
    create_job(client, name, namespace, f"{app}-1")
    wait_for(lambda: reservation(client, f"pmj-{name}"), timeout_s=TIMEOUT, what="the reservation")
    return owner, name


def passes(process: DeschedulerProcess) -> float:
    """The descheduler's passes over every unfinished job so far."""
    return process.metric("tessera_descheduler_sync_duration_seconds_count")


def wait_passes(process: DeschedulerProcess, count: int) -> None:
    """Until `count` more passes have run: each had its chance to do what must not happen."""
    target = passes(process) + count
    wait_for(lambda: passes(process) >= target, timeout_s=TIMEOUT, what=f"{count} descheduler passes")


def succeeded(client: Client, name: str) -> dict[str, Any]:
    return wait_for(
        lambda: (s := job_status(client, name)).get("phase") == "Succeeded" and s, timeout_s=TIMEOUT, what="success"
    )


@pytest.mark.scheduler_stand_in
def test_reservation_first_never_evicts_before_the_reservation_is_available(
    client: Client, namespace: str, start_descheduler: Callable[..., DeschedulerProcess]
) -> None:
    process = start_descheduler()
    owner = owner_replicaset(client, namespace, "web")
    create_running_pod(client, namespace, "web-1", node="n-old", owner=owner)
    name = unique("move")
    create_job(client, name, namespace, "web-1")

    rsv = wait_for(lambda: reservation(client, f"pmj-{name}"), timeout_s=TIMEOUT, what="the reservation")
    assert rsv["spec"]["owners"] == [{"controller": {**owner, "namespace": namespace}}]
    assert "nodeName" not in rsv["spec"]["template"]["spec"]
    assert rsv["metadata"]["labels"][names.LABEL_MIGRATION_JOB] == name
    wait_for(lambda: conditions(job_status(client, name)).get("ReservationCreated"), what="ReservationCreated")
    # As Koordinator's controller does, the job names the Reservation it made (kubectl get pmj).
    job = client.resource(names.POD_MIGRATION_JOBS).get(name)
    ref = job["spec"]["reservationOptions"]["reservationRef"]
    assert (ref["kind"], ref["name"], ref["uid"]) == ("Reservation", f"pmj-{name}", rsv["metadata"]["uid"])

    wait_passes(process, 10)  # the pod must stay while the Reservation is Pending
    assert pod_exists(client, namespace, "web-1")
    assert "Eviction" not in conditions(job_status(client, name))
    assert process.metric("tessera_descheduler_evictions_total") == 0
    assert job_status(client, name)["phase"] == "Running"

    make_available(client, f"pmj-{name}", "n-new")
    wait_for(lambda: not pod_exists(client, namespace, "web-1"), timeout_s=TIMEOUT, what="the eviction")
    status = wait_for(
        lambda: (s := job_status(client, name)).get("reason") == "WaitForPodBindReservation" and s,
        timeout_s=TIMEOUT,
        what="the job to wait for the replacement",
    )
    assert conditions(status)["ReservationScheduled"]["status"] == "True"
    assert conditions(status)["Eviction"]["status"] == "True"
    assert (status["nodeName"], status["status"]) == ("n-new", "PodBoundReservation")

    place_replacement(client, reservation(client, f"pmj-{name}") or {}, "web-2", owner=owner)
    status = succeeded(client, name)
    assert status["podRef"]["name"] == "web-2"
    assert conditions(status)["PodBoundReservation"]["status"] == "True"
    assert process.metric("tessera_descheduler_evictions_total", result="ok") == 1
    assert process.metric("tessera_descheduler_migrations_total", phase="Succeeded") == 1

    # An Event for each decision, on the job (cluster-scoped: in `default`) and on the pods.
    def reasons(namespace: str, kind: str, name: str) -> set[str]:
        items = client.resource(EVENTS).list(namespace=namespace).items
        return {
            e["reason"] for e in items if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name
        }

    # Koordinator's reasons on the job (its pod_migration_job_types.go and migration controller).
    expected = {
        "MigrationStarted",
        "ReservationCreated",
        "ReservationScheduled",
        "Evicting",
        "EvictComplete",
        "Complete",
    }
    wait_for(lambda: reasons("default", "PodMigrationJob", name) >= expected, timeout_s=TIMEOUT, what="job events")
    wait_for(
        lambda: reasons(namespace, "Pod", "web-1") >= {"Migrating", "MigrationEvicted"},
        timeout_s=TIMEOUT,
        what="events on the old pod",
    )
    wait_for(lambda: "MigrationSucceeded" in reasons(namespace, "Pod", "web-2"), timeout_s=TIMEOUT, what="new pod")


def test_bad_jobs_get_a_clear_status(
    client: Client, namespace: str, start_descheduler: Callable[..., DeschedulerProcess]
) -> None:
    start_descheduler()
    create_running_pod(client, namespace, "bare", node="n-old", owner=None)
    missing, bare = unique("missing"), unique("bare")
    create_job(client, missing, namespace, "no-such-pod")
    create_job(client, bare, namespace, "bare")

    def failed(name: str) -> dict[str, str]:
        return wait_for(
            lambda: (s := job_status(client, name)).get("phase") == "Failed" and s, timeout_s=TIMEOUT, what=name
        )

    assert failed(missing)["reason"] == "MissingPod"
    # Objects the CRD's schema lets in but that cannot work: Failed, InvalidJob, naming the field.
    bad_ttl, nameless = unique("ttl"), unique("nameless")
    jobs = client.resource(names.POD_MIGRATION_JOBS)
    for name, spec in (
        (bad_ttl, {"podRef": {"namespace": namespace, "name": "bare"}, "ttl": "soon"}),
        (nameless, {"podRef": {"namespace": namespace}}),
    ):
        jobs.create(
            {
                "apiVersion": names.POD_MIGRATION_JOBS.api_version,
                "kind": "PodMigrationJob",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
    status = failed(bad_ttl)
    assert status["reason"] == "InvalidJob" and "spec.ttl" in status["message"]
    status = failed(nameless)
    assert status["reason"] == "InvalidJob" and "spec.podRef" in status["message"]
    status = failed(bare)
    assert status["reason"] == "ForbiddenMigratePod"
    assert "nothing would recreate it" in status["message"]
    assert pod_exists(client, namespace, "bare")
    assert reservation(client, f"pmj-{bare}") is None


def test_timeout_before_eviction_rolls_back(
    client: Client, namespace: str, start_descheduler: Callable[..., DeschedulerProcess]
) -> None:
    start_descheduler()
    owner = owner_replicaset(client, namespace, "api")
    create_running_pod(client, namespace, "api-1", node="n-old", owner=owner)
    name = unique("slow")
    create_job(client, name, namespace, "api-1", ttl="3s")
    wait_for(lambda: reservation(client, f"pmj-{name}"), timeout_s=TIMEOUT, what="the reservation")
    status = wait_for(
        lambda: (s := job_status(client, name)).get("phase") == "Failed" and s, timeout_s=TIMEOUT, what="the timeout"
    )
    assert status["reason"] == "Timeout"
    wait_for(lambda: reservation(client, f"pmj-{name}") is None, timeout_s=TIMEOUT, what="the rollback")
    assert pod_exists(client, namespace, "api-1")


def test_dry_run_evicts_nothing(
    client: Client, namespace: str, start_descheduler: Callable[..., DeschedulerProcess]
) -> None:
    process = start_descheduler("--dry-run")
    owner = owner_replicaset(client, namespace, "db")
    create_running_pod(client, namespace, "db-1", node="n-old", owner=owner)
    name = unique("dry")
    create_job(client, name, namespace, "db-1", mode="EvictDirectly")
    status = wait_for(
        lambda: (s := job_status(client, name)).get("reason") == "DryRun" and s, timeout_s=TIMEOUT, what="dry run"
    )
    assert status["phase"] == "Pending"
    assert "would migrate pod" in status["message"]
    wait_passes(process, 5)
    assert pod_exists(client, namespace, "db-1")
    assert reservation(client, f"pmj-{name}") is None
    assert process.metric("tessera_descheduler_evictions_total") == 0
    assert process.metric("tessera_descheduler_dry_run_total") == 1


@pytest.mark.scheduler_stand_in
def test_kill_9_mid_migration_resumes_from_the_api_objects(
    client: Client, namespace: str, start_descheduler: Callable[..., DeschedulerProcess]
) -> None:
    first = start_descheduler()
    owner, name = reserving(client, namespace, "svc")
    first.kill()

    make_available(client, f"pmj-{name}", "n-new")  # the scheduler goes on meanwhile
    second = start_descheduler()
    wait_for(lambda: not pod_exists(client, namespace, "svc-1"), timeout_s=TIMEOUT, what="the eviction")
    place_replacement(client, reservation(client, f"pmj-{name}") or {}, "svc-2", owner=owner)
    status = succeeded(client, name)
    assert status["nodeName"] == "n-new"
    reservations = [
        r
        for r in client.resource(names.RESERVATIONS).list().items
        if r["metadata"].get("labels", {}).get(names.LABEL_MIGRATION_JOB) == name
    ]
    assert len(reservations) == 1
    assert second.metric("tessera_descheduler_evictions_total", result="ok") == 1


def test_deleting_a_job_rolls_its_reservation_back(
    client: Client, namespace: str, start_descheduler: Callable[..., DeschedulerProcess]
) -> None:
    start_descheduler()
    _, name = reserving(client, namespace, "q")
    client.resource(names.POD_MIGRATION_JOBS).delete(name)
    wait_for(lambda: reservation(client, f"pmj-{name}") is None, timeout_s=TIMEOUT, what="the rollback")
    assert pod_exists(client, namespace, "q-1")


@pytest.mark.scheduler_stand_in
def test_kill_9_after_the_eviction_resumes_without_a_second_eviction(
    client: Client, namespace: str, start_descheduler: Callable[..., DeschedulerProcess]
) -> None:
    first = start_descheduler()
    owner, name = reserving(client, namespace, "late")
    make_available(client, f"pmj-{name}", "n-new")
    wait_for(lambda: not pod_exists(client, namespace, "late-1"), timeout_s=TIMEOUT, what="the eviction")
    first.kill()

    second = start_descheduler()
    place_replacement(client, reservation(client, f"pmj-{name}") or {}, "late-2", owner=owner)
    status = succeeded(client, name)
    assert status["podRef"]["name"] == "late-2"
    assert second.metric("tessera_descheduler_evictions_total") == 0


def test_a_reservation_younger_than_the_cache_is_not_taken_for_a_deleted_one(client: Client, namespace: str) -> None:
    """The executor's cache may not yet show the Reservation it has just created. Its next step
    must wait for it, not fail the job as if someone had deleted it (MissingReservation): under a
    burst the Reservation informer lags behind the job's own status write."""
    owner = owner_replicaset(client, namespace, "lag")
    pod = create_running_pod(client, namespace, "lag-1", node="n-old", owner=owner)
    name = unique("lag")
    created = create_job(client, name, namespace, "lag-1")
    cluster = Cluster(pods=Store(BY_NAMESPACE))  # filled by hand: it never sees the Reservation
    cluster.pods.upsert(f"{namespace}/lag-1", pod["metadata"]["resourceVersion"], pod)
    cluster.jobs.upsert(name, created["metadata"]["resourceVersion"], created)
    executor = Executor(
        client,
        cluster,
        Arbiter(ArbitrationSettings()),
        settings=MigrationSettings(),
        metrics=Metrics(),
        events=EventRecorder(client, "tessera-descheduler"),
    )
    for _ in range(3):  # admit, create the Reservation, then a step with the cache behind
        executor.sync()
    assert reservation(client, f"pmj-{name}") is not None
    status = job_status(client, name)
    assert (status.get("phase"), status.get("reason")) == ("Running", "Pending"), status  # waits for it
