"""Two `tessera descheduler --leader-elect` replicas: only the leader executes jobs; the follower
keeps warm caches and takes over after a crash. And a PodDisruptionBudget without room holds a
job back before any eviction is tried."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from apis.extension.names import GroupVersionResource
from cli.launchers.base import leader_election_flags
from cli.launchers.descheduler import DeschedulerProcess
from kube.client import Client
from tests.integration.descheduler.migrations import (
    TIMEOUT,
    create_job,
    create_running_pod,
    job_status,
    owner_replicaset,
    pod_exists,
)
from tests.support.cluster import unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

PDBS = GroupVersionResource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True)


def leader_of(processes: list[DeschedulerProcess]) -> DeschedulerProcess:
    leading: list[DeschedulerProcess] = []

    def one() -> bool:
        leading[:] = [p for p in processes if p.metric("tessera_descheduler_leader") == 1]
        return len(leading) == 1

    wait_for(one, timeout_s=TIMEOUT, what="exactly one leader")
    return leading[0]


def test_only_the_leader_works_and_the_follower_takes_over_after_a_crash(
    client: Client, namespace: str, start_descheduler: Callable[..., DeschedulerProcess]
) -> None:
    lease = unique("tessera-descheduler")
    pair = [
        start_descheduler(*leader_election_flags(name=lease, namespace="default", identity=f"replica-{i}"))
        for i in range(2)
    ]
    leader = leader_of(pair)
    follower = next(p for p in pair if p is not leader)
    leader.kill()
    assert leader_of([follower]) is follower

    owner = owner_replicaset(client, namespace, "w")
    create_running_pod(client, namespace, "w-1", node="n1", owner=owner)
    name = unique("after")
    create_job(client, name, namespace, "w-1", mode="EvictDirectly")
    wait_for(lambda: job_status(client, name).get("phase") == "Succeeded", timeout_s=TIMEOUT, what="the new leader")
    assert follower.metric("tessera_descheduler_evictions_total", result="ok") == 1


def test_a_budget_without_room_holds_the_job_before_any_eviction(
    client: Client, namespace: str, start_descheduler: Callable[..., DeschedulerProcess]
) -> None:
    process = start_descheduler()
    owner = owner_replicaset(client, namespace, "db")
    create_running_pod(client, namespace, "db-1", node="n1", owner=owner, labels={"app": "db"})
    pdbs = client.resource(PDBS)
    pdbs.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        },
        namespace=namespace,
    )
    pdbs.patch(
        "db",
        {"status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}},
        namespace=namespace,
        subresource="status",
    )
    name = unique("pdb")
    create_job(client, name, namespace, "db-1", mode="EvictDirectly")
    status = wait_for(
        lambda: (s := job_status(client, name)).get("reason") == "RefusedPdb" and s, timeout_s=TIMEOUT, what="a hold"
    )
    assert status["phase"] == "Pending"
    assert f"PodDisruptionBudget {namespace}/db allows no disruption now" in status["message"]
    assert pod_exists(client, namespace, "db-1")
    assert process.metric("tessera_descheduler_refusals_total", rule="pdb") == 1
    assert process.metric("tessera_descheduler_evictions_total") == 0
