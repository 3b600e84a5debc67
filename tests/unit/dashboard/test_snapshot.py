"""The page's state as JSON, and patches that carry only the node rows that changed."""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence

from apis.crds.device import Device
from apis.crds.podmigrationjob import PodMigrationJob
from apis.crds.reservation import Reservation
from apis.extension import names
from apis.k8s.core import Pod
from dashboard import snapshot, view
from dashboard.invalid import Invalid, tolerant
from tests.support.gpuobjects import (
    GPU_MEMORY,
    NOW,
    make_device,
    make_migration,
    make_pod,
    make_quota,
    make_reservation,
)


def state(
    devices: Sequence[Device],
    pods: Sequence[Pod],
    *,
    reservations: Sequence[Reservation] = (),
    jobs: Sequence[PodMigrationJob | Invalid] = (),
    now: datetime.datetime = NOW,
) -> snapshot.State:
    """The state of these objects, with one ElasticQuota and no gang."""
    return view.state(
        devices=devices,
        pods=pods,
        pod_groups=[],
        quotas=[make_quota("q", min={names.GPU_CORE: 100}, max={names.GPU_CORE: 200})],
        scheduler={},
        scrapes=(None, None),
        now=now,
        reservations=reservations,
        jobs=jobs,
    )


def test_the_full_state_has_every_node_and_the_summary() -> None:
    doc = json.loads(
        state([make_device("n1"), make_device("n2")], [make_pod("a", node="n1", gpus={0: 50}), make_pod("p")]).full()
    )
    assert [n["name"] for n in doc["nodes"]] == ["n1", "n2"]
    gpu0 = doc["nodes"][0]["groups"][0]["gpus"][0]
    assert gpu0["shares"] == [{"pod": "default/a", "core": 50, "ratio": 50, "memory": 40 << 30, "vfs": 0}]
    summary = doc["summary"]
    assert summary["totals"]["allocated"] == 50 and summary["totals"]["gpus"] == 8
    assert [p["pod"] for p in summary["pending"]] == ["default/p"]
    assert summary["health"] is None
    assert summary["quotas"][0]["resources"] == [
        {
            "name": names.GPU_CORE,
            "min": 100,
            "max": 200,
            "runtime": None,
            "used": None,
            "text": {"min": "100", "max": "200", "runtime": None, "used": None},
        }
    ]


def test_a_patch_carries_only_changed_and_removed_nodes() -> None:
    before = state([make_device("n1"), make_device("n2"), make_device("n3")], [])
    after = state([make_device("n1"), make_device("n2", unhealthy={1: "Xid79"})], [])
    patch = snapshot.diff(before, after)
    assert patch is not None
    doc = json.loads(patch)
    assert [n["name"] for n in doc["nodes"]] == ["n2"]
    assert doc["removed"] == ["n3"]
    assert doc["summary"]["totals"]["unhealthyGpus"] == 1


def test_no_change_no_patch_and_no_state_before_means_everything() -> None:
    one = state([make_device("n1")], [])
    assert snapshot.diff(one, state([make_device("n1")], [])) is None
    assert snapshot.diff(None, one) == one.full()


def test_pending_pods_sent_are_capped_but_counted() -> None:
    pods = [make_pod(f"p{i}") for i in range(snapshot.MAX_PENDING + 5)]
    summary = json.loads(state([], pods).full())["summary"]
    assert len(summary["pending"]) == snapshot.MAX_PENDING and summary["pendingTotal"] == snapshot.MAX_PENDING + 5


def test_reservations_and_migrations_are_in_the_summary_and_reserved_gpus_in_the_rows() -> None:
    held = make_reservation("trainer", node="n1", gpus={0: 100})
    owner = make_pod("o", node="n1", gpus={1: 50}, annotations={names.ANNOTATION_RESERVATION_ALLOCATED: '{"name":"x"}'})
    bad = tolerant("PodMigrationJob", PodMigrationJob.from_dict)({"metadata": {"name": "b"}, "spec": {}})
    jobs = [make_migration("m", phase="Running", reservation="trainer"), bad]
    doc = json.loads(state([make_device("n1")], [owner], reservations=[held], jobs=jobs).full())
    gpus = doc["nodes"][0]["groups"][0]["gpus"]
    reserved = {"reservation": "trainer", "owners": ["labels app=train"], "core": 100, "ratio": 100}
    assert gpus[0]["reserved"] == [{**reserved, "memory": GPU_MEMORY, "vfs": 0}]
    assert gpus[1]["shares"][0]["reservation"] == "x"
    summary = doc["summary"]
    assert summary["totals"]["reserved"] == 100
    assert [(r["name"], r["phase"], r["node"]) for r in summary["reservations"]] == [("trainer", "Available", "n1")]
    assert [(m["name"], m["phase"], m["reservation"]) for m in summary["migrations"]] == [
        ("m", "Running", "trainer"),
        ("b", "Invalid", ""),
    ]
    assert "spec.podRef" in summary["migrations"][1]["message"]
    assert summary["reservationsTotal"] == 1 and summary["migrationsTotal"] == 2


def test_ended_reservations_and_migrations_sent_are_capped_but_counted() -> None:
    ended = [make_migration(f"m{i}", phase="Succeeded") for i in range(snapshot.MAX_FINISHED + 3)]
    summary = json.loads(state([], [], jobs=[*ended, make_migration("live", phase="Running")]).full())["summary"]
    assert len(summary["migrations"]) == snapshot.MAX_FINISHED + 1 and summary["migrationsTotal"] == len(ended) + 1
    assert summary["migrations"][0]["name"] == "live"


def test_a_patch_carries_only_the_summary_entries_that_changed() -> None:
    def at(now: datetime.datetime, *jobs: PodMigrationJob) -> snapshot.State:
        return state([make_device("n1")], [], jobs=jobs, now=now)

    running = make_migration("m", phase="Running")
    later = NOW + datetime.timedelta(seconds=5)
    patch = snapshot.diff(at(NOW, running), at(later, running))
    assert patch is not None
    assert json.loads(patch)["summary"] == {"now": later.timestamp()}  # times are absolute: no table changed
    patch = snapshot.diff(at(NOW, running), at(later, make_migration("m", phase="Succeeded")))
    assert patch is not None
    summary = json.loads(patch)["summary"]
    assert sorted(summary) == ["migrations", "now"] and summary["migrations"][0]["phase"] == "Succeeded"
