"""Reservation and PodMigrationJob as parsed by apis/: owner matching, expiry, the reserve pod."""

import datetime
from typing import Any

import pytest

from apis.crds.podmigrationjob import MigrationMode, MigrationPhase, PodMigrationJob
from apis.crds.reservation import (
    ObjectRef,
    Reservation,
    ReservationPhase,
    allocated_from_pod,
    reservation_allocated_annotation,
)
from apis.errors import AnnotationError, ValidationError
from apis.extension import names
from apis.k8s.core import Pod


def reservation(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "template": {
            "metadata": {"namespace": "ml", "labels": {"from": "template"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]},
        },
        "owners": [{"labelSelector": {"matchLabels": {"app": "infer"}}}],
    }
    base.update(spec)
    return {
        "metadata": {
            "name": "r1",
            "uid": "uid-r1",
            "labels": {"from": "reservation"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": base,
    }


def pod(
    name: str = "p", namespace: str = "ml", labels: dict[str, str] | None = None, owners: list[Any] | None = None
) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "labels": labels or {},
                "ownerReferences": owners or [],
            },
            "spec": {"containers": [{"name": "c"}]},
        }
    )


RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "infer-5d8", "uid": "rs-uid", "controller": True}


@pytest.mark.parametrize(
    ("owner", "candidate", "matches"),
    [
        ({"labelSelector": {"matchLabels": {"app": "infer"}}}, pod(labels={"app": "infer"}), True),
        ({"labelSelector": {"matchLabels": {"app": "infer"}}}, pod(labels={"app": "train"}), False),
        ({"object": {"namespace": "ml", "name": "p"}}, pod(), True),
        ({"object": {"namespace": "other", "name": "p"}}, pod(), False),
        ({"object": {"uid": "uid-q"}}, pod(), False),
        ({"controller": {"kind": "ReplicaSet", "name": "infer-5d8", "uid": "rs-uid"}}, pod(owners=[RS]), True),
        ({"controller": {"kind": "ReplicaSet", "name": "infer-5d8", "namespace": "x"}}, pod(owners=[RS]), False),
        ({"controller": {"kind": "ReplicaSet", "name": "infer-5d8"}}, pod(), False),
        # fields inside one owner are ANDed
        (
            {"controller": {"kind": "ReplicaSet", "name": "infer-5d8"}, "labelSelector": {"matchLabels": {"app": "x"}}},
            pod(owners=[RS], labels={"app": "infer"}),
            False,
        ),
    ],
)
def test_owner_matching_follows_koordinator(owner: dict[str, Any], candidate: Pod, matches: bool) -> None:
    assert Reservation.from_dict(reservation(owners=[owner])).matches_owner(candidate) is matches


def test_owners_are_alternatives_and_a_pod_can_opt_out() -> None:
    r = Reservation.from_dict(reservation(owners=[{"object": {"name": "a"}}, {"object": {"name": "b"}}]))
    assert r.matches_owner(pod("a")) and r.matches_owner(pod("b")) and not r.matches_owner(pod("c"))
    assert not r.matches_owner(pod("a", labels={names.LABEL_RESERVATION_IGNORED: "true"}))


def test_the_reserve_pod_is_the_template_named_after_the_reservation() -> None:
    r = Reservation.from_dict({**reservation(), "status": {"phase": "Available", "nodeName": "n1"}})
    p = r.reserve_pod()
    assert (p.meta.namespace, p.meta.name, p.meta.uid, p.node_name) == ("ml", "r1", "uid-r1", "n1")
    assert p.meta.labels["from"] == "reservation"  # the Reservation's own labels win
    assert p.priority == 2**31 - 1
    assert p.requests()["nvidia.com/gpu"] == 2
    assert r.phase is ReservationPhase.AVAILABLE and r.phase.holds_resources


@pytest.mark.parametrize(
    ("spec", "expiry"),
    [
        ({}, datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)),  # default 24h
        ({"ttl": "30m"}, datetime.datetime(2026, 1, 1, 0, 30, tzinfo=datetime.UTC)),
        ({"ttl": "0s"}, None),
        ({"ttl": "0"}, None),
        # Both: whichever comes first, as Koordinator's controller checks them; ttl 0: never.
        ({"ttl": "1h", "expires": "2026-03-01T00:00:00Z"}, datetime.datetime(2026, 1, 1, 1, tzinfo=datetime.UTC)),
        ({"expires": "2026-01-01T00:10:00Z"}, datetime.datetime(2026, 1, 1, 0, 10, tzinfo=datetime.UTC)),
        ({"ttl": "0", "expires": "2026-01-01T00:10:00Z"}, None),
    ],
)
def test_expiry(spec: dict[str, Any], expiry: datetime.datetime | None) -> None:
    r = Reservation.from_dict(reservation(**spec))
    assert r.expiry() == expiry
    if expiry is not None:
        assert r.expired(expiry) and not r.expired(expiry - datetime.timedelta(seconds=1))


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"owners": []}, "spec.owners"),
        ({"owners": [{}]}, "spec.owners[0]"),
        ({"ttl": "a day"}, "spec.ttl"),
        ({"expires": "tomorrow"}, "spec.expires"),
        ({"template": {"metadata": {}}}, "spec.template"),
        ({"template": {"spec": {"containers": "c"}}}, "spec.template.spec"),
        ({"allocatePolicy": "Loose"}, "spec.allocatePolicy"),
    ],
)
def test_bad_reservations_name_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as e:
        Reservation.from_dict(reservation(**spec))
    assert field in str(e.value) and "reservation r1" in str(e.value)


def test_round_trip_and_the_pod_annotation() -> None:
    r = Reservation.from_dict(reservation(ttl="2h"))
    assert Reservation.from_dict(r.to_dict()) == r
    p = pod(labels={"app": "infer"})
    tagged = Pod.from_dict(
        {
            "metadata": {
                "name": "p",
                "annotations": {names.ANNOTATION_RESERVATION_ALLOCATED: reservation_allocated_annotation(r)},
            }
        }
    )
    got = allocated_from_pod(tagged)
    assert got is not None and (got.name, got.uid) == ("r1", "uid-r1")
    assert allocated_from_pod(p) is None
    bad = Pod.from_dict({"metadata": {"name": "p", "annotations": {names.ANNOTATION_RESERVATION_ALLOCATED: "[1]"}}})
    with pytest.raises(AnnotationError):
        allocated_from_pod(bad)


def test_pod_migration_job() -> None:
    raw = {"metadata": {"name": "m"}, "spec": {"podRef": {"namespace": "ml", "name": "p"}, "ttl": "5m"}}
    job = PodMigrationJob.from_dict(raw)
    assert (job.mode, job.phase, job.ttl_seconds) == (MigrationMode.RESERVATION_FIRST, MigrationPhase.PENDING, 300)
    assert PodMigrationJob.from_dict(job.to_dict()) == job
    for spec, field in [
        ({}, "spec.podRef"),
        ({"podRef": {"name": "p"}}, "spec.podRef"),
    ]:
        with pytest.raises(ValidationError, match=field.replace(".", r"\.")):
            PodMigrationJob.from_dict({"metadata": {"name": "m"}, "spec": spec})


def test_taints_policy_and_what_an_owner_takes() -> None:
    taints = [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]
    two = {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"}
    container = {"name": "c", "resources": {"requests": two}}
    template = {"metadata": {"namespace": "ml"}, "spec": {"containers": [container]}}
    r = Reservation.from_dict(reservation(template=template, taints=taints, allocatePolicy="Restricted"))
    assert [str(t) for t in r.taints] == ["dedicated=infer:NoSchedule"]
    assert Reservation.from_dict(r.to_dict()).taints == r.taints
    assert r.restricted_names() == ("cpu", "memory", "nvidia.com/gpu") == r.counted_names()
    owners = [{"cpu": 1000, "memory": 3 * 2**30, "ephemeral-storage": 5}, {"cpu": 500}]
    allocated = r.allocated_by(owners)
    assert allocated == {"cpu": 1500, "memory": 3 * 2**30}  # only what it reserves
    assert r.remaining(allocated) == {"cpu": 500, "memory": 2**30, "nvidia.com/gpu": 1}
    assert r.remaining({"cpu": 9000}) == {"memory": 4 * 2**30, "nvidia.com/gpu": 1}  # never below zero
    options = {names.ANNOTATION_RESERVATION_RESTRICTED_OPTIONS: '{"resources": ["cpu"]}'}
    raw = reservation(template=template, allocatePolicy="Restricted")
    raw["metadata"]["annotations"] = options
    only_cpu = Reservation.from_dict(raw)
    assert only_cpu.restricted_names() == ("cpu",) == only_cpu.counted_names()
    assert only_cpu.allocated_by(owners) == {"cpu": 1500}
    # The options mean nothing to an Aligned one (Koordinator reads them only when Restricted).
    raw["spec"]["allocatePolicy"] = "Aligned"
    assert Reservation.from_dict(raw).restricted_names() == ()


def test_malformed_restricted_options_make_a_restricted_reservation_unreadable() -> None:
    raw = reservation(allocatePolicy="Restricted")
    raw["metadata"]["annotations"] = {names.ANNOTATION_RESERVATION_RESTRICTED_OPTIONS: "[cpu"}
    with pytest.raises(ValidationError, match="reservation-restricted-options"):
        Reservation.from_dict(raw)


def test_current_owners_are_written_as_koordinator_writes_them() -> None:
    assert ObjectRef.to_pod(pod("p")).to_dict() == {"namespace": "ml", "name": "p", "uid": "uid-p"}
