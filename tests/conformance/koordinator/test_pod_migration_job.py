"""pod-migration-job.md: a Deployment's pod migrated with a PodMigrationJob — reserved first, then
evicted — and the manual's variants (EvictDirectly, paused, a named Reservation).

The manual's Deployment has one replica. Koordinator's migration arbitration today refuses to
move a workload's only pod (its expected-replicas check), and so do Tessera's safety rules
(`maxUnavailable` 25% of 1 is 0): the first test shows that; the others scale it to 4 replicas.
PodMigrationJobs have no namespace: each test deletes its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.koordinator.koord import Koord

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: pod-demo}
spec:
  progressDeadlineSeconds: 600
  replicas: REPLICAS
  revisionHistoryLimit: 10
  selector:
    matchLabels: {app: pod-demo}
  strategy:
    rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}
    type: RollingUpdate
  template:
    metadata:
      creationTimestamp: null
      labels: {app: pod-demo}
      name: stress
    spec:
      containers:
      - args: [-c, "1"]
        command: [stress]
        image: polinux/stress
        imagePullPolicy: Always
        name: stress
        resources:
          limits: {cpu: "2", memory: 4Gi}
          requests: {cpu: 200m, memory: 400Mi}
      restartPolicy: Always
      schedulerName: koord-scheduler
"""


def job(ns: str, pod: str, *, mode: str = "ReservationFirst", paused: str = "false", extra: str = "") -> str:
    return f"""
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: PodMigrationJob
metadata: {{name: migrationjob-demo}}
spec:
  paused: {paused}
  ttl: 5m
  mode: {mode}
  podRef: {{namespace: {ns}, name: {pod}}}
{extra}status:
  phase: Pending
"""


def running_pods(koord: Koord, ns: str, count: int) -> list[dict[str, Any]]:
    def ready(pods: dict[str, Any]) -> Any:
        items = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
        up = [p for p in items if (p.get("status") or {}).get("phase") == "Running"]
        return len(up) == count and len(items) == count and up

    return list(koord.wait("pods", "", ready, namespace=ns, what=f"{count} pods Running"))


def status(koord: Koord) -> dict[str, Any]:
    return dict(koord.get("pmj", "migrationjob-demo").get("status") or {})


def finished(koord: Koord) -> dict[str, Any]:
    return dict(
        koord.wait(
            "pmj",
            "migrationjob-demo",
            lambda j: (j.get("status") or {}).get("phase") in ("Succeeded", "Failed") and j["status"],
            what="the job to finish",
        )
    )


@pytest.fixture
def demo(koord: Koord) -> Iterator[str]:
    ns = koord.namespace("pmj")
    try:
        yield ns
    finally:
        koord.up.kubectl("delete", "pmj", "migrationjob-demo", "--ignore-not-found", "--wait=true")
        # Its Reservation goes with it (an owner reference): gone before the next test's job.
        koord.up.kubectl("delete", "reservation", "pmj-migrationjob-demo", "--ignore-not-found", "--wait=true")
        koord.delete("deployment", "pod-demo", namespace=ns)


def test_the_manuals_single_replica_is_not_moved(koord: Koord, demo: str) -> None:
    koord.up.kubectl("create", "-n", demo, "-f", "-", stdin=DEPLOYMENT.replace("REPLICAS", "1"))
    [pod] = running_pods(koord, demo, 1)
    koord.up.kubectl("create", "-f", "-", stdin=job(demo, pod["metadata"]["name"]))
    held = koord.wait("pmj", "migrationjob-demo", lambda j: (j.get("status") or {}).get("reason") and j["status"])
    assert (held["phase"], held["reason"]) == ("Pending", "RefusedWorkloadUnavailable")
    assert f"Deployment {demo}/pod-demo has 0 of 1 pods unavailable" in held["message"]
    assert running_pods(koord, demo, 1)[0]["metadata"]["name"] == pod["metadata"]["name"]


def test_reservation_first_moves_the_pod_as_the_manual_shows(koord: Koord, demo: str) -> None:
    koord.up.kubectl("create", "-n", demo, "-f", "-", stdin=DEPLOYMENT.replace("REPLICAS", "4"))
    pods = running_pods(koord, demo, 4)
    old, old_node = pods[0]["metadata"]["name"], pods[0]["spec"]["nodeName"]
    created = koord.up.kubectl("create", "-f", "-", stdin=job(demo, old))
    assert created.strip() == "podmigrationjob.scheduling.koordinator.sh/migrationjob-demo created"
    done = finished(koord)
    assert (done["phase"], done["status"]) == ("Succeeded", "Complete")
    assert done["nodeName"] != old_node  # the Reservation excludes the pod's node, as Koordinator's
    new = done["podRef"]["name"]
    table = koord.up.kubectl("get", "podmigrationjob", "migrationjob-demo").splitlines()
    assert table[0].split() == [
        "NAME", "PHASE", "STATUS", "AGE", "NODE", "RESERVATION", "PODNAMESPACE", "POD", "NEWPOD", "TTL"
    ]  # fmt: skip
    row = table[1].split()
    # RESERVATION is the one the job made (Koordinator names it by the job's uid, Tessera
    # `pmj-<job>`); TTL as Koordinator prints it.
    assert (row[0], row[1], row[2], row[4], row[5], row[6], row[7], row[8], row[9]) == (
        "migrationjob-demo", "Succeeded", "Complete", done["nodeName"], "pmj-migrationjob-demo", demo, old, new, "5m0s"
    )  # fmt: skip
    reservation = '"pmj-migrationjob-demo"'
    # The manual's `kubectl describe podmigrationjob` Events, in Koordinator's reasons and words
    # (its "Try to evict Pod" is an older Koordinator's wording for Evicting).
    events = [(reason, message) for _, reason, message in koord.events("migrationjob-demo")]
    expected = [
        ("ReservationCreated", f"Successfully create Reservation {reservation}"),
        ("ReservationScheduled", f'Assigned Reservation {reservation} to node "{done["nodeName"]}"'),
        ("EvictComplete", f'Pod "{demo}/{old}" has been evicted'),
        ("Complete", f'Bind Pod "{demo}/{new}" in Reservation {reservation}'),
    ]
    assert [e for e in events if e[0] in {r for r, _ in expected}] == expected
    assert any(
        r == "Evicting" and m.startswith(f'Pod "{demo}/{old}" evicted from node "{old_node}"') for r, m in events
    )


def test_evict_directly_only_evicts(koord: Koord, demo: str) -> None:
    koord.up.kubectl("create", "-n", demo, "-f", "-", stdin=DEPLOYMENT.replace("REPLICAS", "4"))
    old = running_pods(koord, demo, 4)[0]["metadata"]["name"]
    koord.up.kubectl("create", "-f", "-", stdin=job(demo, old, mode="EvictDirectly"))
    done = finished(koord)
    assert (done["phase"], done["status"], done["message"]) == (
        "Succeeded",
        "Complete",
        f'Pod "{demo}/{old}" has been evicted',
    )
    assert "pmj-migrationjob-demo" not in koord.up.kubectl("get", "reservations", "-o", "name")


def test_a_paused_job_waits_until_it_is_resumed(koord: Koord, demo: str) -> None:
    koord.up.kubectl("create", "-n", demo, "-f", "-", stdin=DEPLOYMENT.replace("REPLICAS", "4"))
    old = running_pods(koord, demo, 4)[0]["metadata"]["name"]
    koord.up.kubectl("create", "-f", "-", stdin=job(demo, old, paused="true"))
    held = koord.wait("pmj", "migrationjob-demo", lambda j: (j.get("status") or {}).get("message") and j["status"])
    assert (held["phase"], held["message"]) == ("Pending", "spec.paused is true")
    koord.up.kubectl("patch", "pmj", "migrationjob-demo", "--type=merge", "-p", '{"spec":{"paused":false}}')
    assert finished(koord)["phase"] == "Succeeded"


def test_a_named_reservation_that_does_not_exist_fails_the_job(koord: Koord, demo: str) -> None:
    """The manual's `reservationRef: {name: reservation-0}`, with no such Reservation: Koordinator's
    reason and words."""
    koord.up.kubectl("create", "-n", demo, "-f", "-", stdin=DEPLOYMENT.replace("REPLICAS", "4"))
    old = running_pods(koord, demo, 4)[0]["metadata"]["name"]
    options = "  reservationOptions:\n    reservationRef: {name: reservation-0}\n"
    koord.up.kubectl("create", "-f", "-", stdin=job(demo, old, extra=options))
    failed = finished(koord)
    assert (failed["phase"], failed["reason"]) == ("Failed", "MissingReservation")
    assert failed["message"].startswith('Abort job caused by missing Reservation "reservation-0"')
    assert koord.wait_event("migrationjob-demo", "MissingReservation").startswith("Abort job caused by")
