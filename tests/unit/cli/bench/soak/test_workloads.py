"""Deployments stay within replicas + maxSurge and get ready; Jobs complete (hand-built states)."""

from __future__ import annotations

import dataclasses
from typing import Any

from apis.k8s.core import Pod
from apis.k8s.meta import OwnerReference
from cli.bench.soak.apps import deployment_manifest, job_manifest
from cli.bench.soak.invariants.workloads import job_incomplete, not_ready, over_surge
from tests.unit.cli.bench.soak.builders import pod, state


def _deployment(replicas: int, *, ready: int = 0, deleting: bool = False) -> dict[str, Any]:
    d = deployment_manifest("web", replicas, 8)
    d["metadata"] |= {"namespace": "soak", "uid": "d-uid"} | ({"deletionTimestamp": "x"} if deleting else {})
    d["status"] = {"readyReplicas": ready}
    return d


def _replicaset(n: int) -> dict[str, Any]:
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d-uid", "controller": True}
    return {"metadata": {"name": f"web-{n}", "namespace": "soak", "uid": f"rs-{n}", "ownerReferences": [ref]}}


def _owned_pod(name: str, rs: int, *, deleting: bool = False) -> Pod:
    built = pod(name, deleting=deleting)
    ref = OwnerReference("apps/v1", "ReplicaSet", f"web-{rs}", f"rs-{rs}", controller=True)
    return dataclasses.replace(built, meta=dataclasses.replace(built.meta, owner_references=(ref,)))


def test_a_rollout_within_max_surge_is_fine_and_one_pod_more_is_not() -> None:
    # maxSurge 1 over 2 replicas: 3 pods across the old and the new ReplicaSet at most.
    within = [_owned_pod("a", 1), _owned_pod("b", 1), _owned_pod("c", 2)]
    sets = (_replicaset(1), _replicaset(2))
    assert over_surge(state(within, deployments=(_deployment(2),), replicasets=sets)) == []
    [violation] = over_surge(state([*within, _owned_pod("d", 2)], deployments=(_deployment(2),), replicasets=sets))
    assert violation.objects == ("deployment soak/web", "soak/a", "soak/b", "soak/c", "soak/d")
    assert "4 active pods, more than replicas + maxSurge = 3" in violation.message


def test_pods_being_deleted_and_pods_of_other_owners_do_not_count_toward_the_surge() -> None:
    pods = [_owned_pod("a", 1), _owned_pod("b", 1), _owned_pod("c", 2), _owned_pod("d", 2, deleting=True), pod("e")]
    assert over_surge(state(pods, deployments=(_deployment(2),), replicasets=(_replicaset(1), _replicaset(2)))) == []


def test_a_deployment_short_of_ready_replicas_is_named_unless_it_is_being_deleted() -> None:
    [violation] = not_ready(state(deployments=(_deployment(3, ready=2),)))
    assert violation.objects == ("deployment soak/web",)
    assert violation.message == "2 of 3 replicas ready"
    assert not_ready(state(deployments=(_deployment(3, ready=3),))) == []
    assert not_ready(state(deployments=(_deployment(3, ready=0, deleting=True),))) == []


def test_a_job_not_complete_is_named_and_a_failed_one_says_so() -> None:
    job = job_manifest("train-1", 8)
    job["metadata"]["namespace"] = "soak"
    [running] = job_incomplete(state(jobs=(job,)))
    assert running.objects == ("job soak/train-1",)
    job["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
    [failed] = job_incomplete(state(jobs=(job,)))
    assert failed.message == "not Complete and Failed"
    job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert job_incomplete(state(jobs=(job,))) == []
