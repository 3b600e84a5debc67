"""The soak's Reservations and PodMigrationJobs against a real API server (a `tessera apiserver`
process): what they create, when owners come, what they clean up. The scheduler's part (a
Reservation becoming Available) is played by writing its status, as the scheduler would."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from apis.extension import names
from cli.bench.soak import reserving
from cli.bench.soak.invariants.liveness import MAY_WAIT
from cli.bench.soak.migrating import Migrating
from cli.bench.soak.observe import Record
from cli.bench.soak.quotaplay import BORROW, LEND, PARENT, QuotaPlay
from cli.bench.soak.reserving import KEEP_S, OWNER_LABEL, Reserving
from cli.bench.soak.workload import NAMESPACE, Shape
from cli.launchers.apiserver import run_apiserver
from cli.launchers.scheduler import pod_manifest
from kube import resources
from kube.client import Client
from tests.unit.cli.bench.soak.builders import GPU


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with run_apiserver() as server:
        server.install_crds()
        with server.client() as c:
            c.resource(resources.NAMESPACES).create({"metadata": {"name": NAMESPACE}})
            yield c


def _only(kind: reserving.ReservationKind, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reserving, "KINDS", (kind,))


def test_a_used_reservation_gets_its_owners_once_available_and_is_deleted_after_keep(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    _only(reserving.ReservationKind(Shape("used", 1, GPU, 1.0), 90.0, owners=(2, 2)), monkeypatch)
    record = Record()
    mix = Reserving(client, record, seed=1, toleration_s=8)
    now = time.time()
    mix.step(now, creating=True)
    api = client.resource(names.RESERVATIONS)
    [created] = [r for r in api.list_all().items if r["metadata"]["name"].startswith("soak-rsv-used")]
    name = created["metadata"]["name"]
    assert created["spec"]["owners"] == [{"labelSelector": {"matchLabels": {OWNER_LABEL: name}}}]
    assert created["spec"]["ttl"] == "90s"
    pods = client.resource(resources.PODS)

    def owners() -> list[str]:
        return [
            p["metadata"]["name"]
            for p in pods.list_all(namespace=NAMESPACE, label_selector=f"{OWNER_LABEL}={name}").items
        ]

    mix.step(now + 1, creating=False)
    assert owners() == []  # Pending: no owner yet
    created["status"] = {"phase": "Available", "nodeName": "n1"}
    api.update_status(created)
    mix.step(now + 2, creating=False)
    assert sorted(owners()) == [f"{name}-owner-0", f"{name}-owner-1"]
    assert mix.owners_created == 2 and set(record.acknowledged_now()) == {f"{NAMESPACE}/{o}" for o in owners()}
    mix.step(now + KEEP_S + 1, creating=False)
    assert owners() == [] and name not in {r["metadata"]["name"] for r in api.list_all().items}
    assert {f"{NAMESPACE}/{name}-owner-{i}" for i in range(2)} <= record.deleted


def test_an_unused_reservation_gets_no_owner_and_at_most_max_live_live_at_once(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    _only(reserving.ReservationKind(Shape("idle", 1, GPU, 1.0), 15.0), monkeypatch)
    mix = Reserving(client, Record(), seed=2, toleration_s=8)
    now = time.time()
    for i in range(reserving.MAX_LIVE + 2):
        mix.step(now + i, creating=True)
    assert mix.created == reserving.MAX_LIVE and mix.owners_created == 0


def test_a_migration_is_asked_for_a_ready_deployment_pod_only(client: Client) -> None:
    pods = client.resource(resources.PODS)
    bare = pod_manifest("bare", {names.CPU: "10m"}, namespace=NAMESPACE, node_name="n1")
    pods.create(bare, namespace=NAMESPACE)
    mix = Migrating(client, seed=1)
    assert mix.migrate_one() is None  # no Deployment pod
    replica = pod_manifest(
        "infer-b-x", {names.CPU: "10m"}, namespace=NAMESPACE, labels={"app": "infer-b"}, node_name="n1"
    )
    created = pods.create(replica, namespace=NAMESPACE)
    assert mix.migrate_one() is None  # not ready yet
    created["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    pods.update_status(created, namespace=NAMESPACE)
    name = mix.migrate_one()
    assert name is not None
    job = client.resource(names.POD_MIGRATION_JOBS).get(name)
    assert job["spec"]["podRef"]["name"] == "infer-b-x" and job["spec"]["mode"] in ("ReservationFirst", "EvictDirectly")
    assert mix.migrate_one() is None  # that pod is being moved already
    assert mix.phases()["Pending"] >= 1


def test_the_quota_family_builds_its_tree_asks_in_every_spelling_and_edits_within_the_rules(client: Client) -> None:
    record = Record()
    play = QuotaPlay(client, record, total_gpus=24, seed=1, toleration_s=8, edit_interval_s=0.0)
    play.setup()
    play.setup()  # idempotent
    api = client.resource(names.ELASTIC_QUOTAS)

    def quotas() -> dict[str, dict[str, Any]]:
        return {q["metadata"]["name"]: q for q in api.list_all().items}

    assert quotas()[PARENT]["spec"] == {"min": {names.NVIDIA_GPU: "4"}, "max": {names.NVIDIA_GPU: "4"}}
    for _ in range(40):
        play.step(creating=True)
    assert play.created == 40 and play.edits == 40
    assert len(play.by_spelling) >= 6  # drawn from every spelling quotas accept
    pods = client.resource(resources.PODS)
    outside = [p for p in pods.list_all(namespace=NAMESPACE).items if p["metadata"]["name"].startswith("spelled-")]
    assert outside and all(MAY_WAIT not in p["metadata"]["labels"] for p in outside)
    assert all(p["metadata"]["labels"][MAY_WAIT] == "true" for p in pods.list_all(namespace=LEND).items)
    now = quotas()
    mins = [int(now[team]["spec"]["min"][names.NVIDIA_GPU]) for team in (LEND, BORROW)]
    assert sum(mins) <= 4  # the children's mins stay within the parent's, as the webhook demands
    for team in (LEND, BORROW):
        assert len(now[team]["spec"]["max"]) in (1, 2)  # one spelling (gpu-core with its ratio: two names)
