"""The migration invariants on hand-built states: each finds its bad state, and a good one is clean."""

from __future__ import annotations

import dataclasses
from typing import Any

from apis.k8s.core import Pod
from apis.k8s.meta import Condition, OwnerReference
from cli.bench.soak.apps import deployment_manifest
from cli.bench.soak.invariants.migrations import below_available, evicted_before_reservation, stuck
from tests.unit.cli.bench.soak.builders import migration, pod, state

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z"


def test_an_eviction_before_the_reservation_was_available_is_a_violation() -> None:
    early = migration("m", {"ReservationScheduled": ("True", T1), "Eviction": ("True", T0)})
    never = migration("n", {"ReservationScheduled": ("False", T0), "Eviction": ("True", T1)})
    assert [v.objects for v in evicted_before_reservation(state([], migrations=(early, never)))] == [
        ("podmigrationjob/m",),
        ("podmigrationjob/n",),
    ]


def test_an_eviction_once_the_reservation_was_available_or_evicting_directly_is_fine() -> None:
    ordered = migration("m", {"ReservationScheduled": ("True", T0), "Eviction": ("True", T0)})
    refused = migration("r", {"ReservationScheduled": ("False", T0), "Eviction": ("False", T0)})
    direct = migration("d", {"Eviction": ("True", T0)}, mode="EvictDirectly")
    assert evicted_before_reservation(state([], migrations=(ordered, refused, direct))) == []


def test_a_job_unfinished_past_its_ttl_is_stuck_and_a_finished_one_is_not() -> None:
    """NOW (the builders') is 1970-01-12 13:46:40."""
    late = migration("late", created="1970-01-12T13:40:00Z", ttl="90s")
    young = migration("young", created="1970-01-12T13:46:00Z", ttl="90s")
    done = migration("done", created="1970-01-12T13:40:00Z", phase="Succeeded")
    found = stuck(state([], migrations=(late, young, done)), default_ttl_s=300)
    assert [v.objects for v in found] == [("podmigrationjob/late",)]
    no_ttl = migration("defaulted", created="1970-01-12T13:44:00Z", ttl="")
    assert stuck(state([], migrations=(no_ttl,)), default_ttl_s=300) == []
    assert len(stuck(state([], migrations=(no_ttl,)), default_ttl_s=60)) == 1


def _deployment(replicas: int, max_unavailable: int = 0) -> dict[str, Any]:
    d = deployment_manifest("infer-a", replicas, 8.0, max_unavailable)
    d["metadata"] |= {"namespace": "soak", "uid": "uid-d"}
    return d


def _replica(name: str, *, ready: bool = True, deleting: bool = False) -> Pod:
    p = pod(name, node_name="n1", deleting=deleting)
    owner = OwnerReference(api_version="apps/v1", kind="ReplicaSet", name="rs", uid="uid-rs", controller=True)
    conditions = (Condition("Ready", "True" if ready else "False"),)
    return dataclasses.replace(p, meta=dataclasses.replace(p.meta, owner_references=(owner,)), conditions=conditions)


def test_a_deployment_with_fewer_ready_pods_than_replicas_less_max_unavailable_is_below_available() -> None:
    owner = {"kind": "Deployment", "uid": "uid-d", "controller": True}
    rs = {"metadata": {"uid": "uid-rs", "ownerReferences": [owner]}}
    pods = [_replica("a"), _replica("b", ready=False), _replica("c", deleting=True)]
    [violation] = below_available(state(pods, deployments=(_deployment(2),), replicasets=(rs,)))
    assert violation.objects == ("deployment soak/infer-a",)
    assert "1 ready pods" in violation.message
    full = [_replica("a"), _replica("b")]
    assert below_available(state(full, deployments=(_deployment(2),), replicasets=(rs,))) == []
    assert below_available(state(pods, deployments=(_deployment(2, max_unavailable=1),), replicasets=(rs,))) == []
    assert len(below_available(state(pods, deployments=(_deployment(3, max_unavailable=1),), replicasets=(rs,)))) == 1
