"""Leader election: two replicas, only the Lease holder binds; killing it hands over; a leader
that cannot renew its Lease exits at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.scheduler import SchedulerProcess
from kube import Client, raw, resources
from proto.scheduler.v1 import scheduler_pb2 as pb
from proto.scheduler.v1 import scheduler_pb2_grpc
from tests.support import apiservers
from tests.support.cluster import (
    GPU_QUARTER,
    PodWatch,
    Watch,
    assert_no_device_shared_beyond_capacity,
    create_gpu_nodes,
    create_namespace,
    create_pod,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

LEASE = "tessera-scheduler"
BOUND = "tessera_scheduler_bindings_total"
BINDS = {"result": "bound"}
LEADER = "tessera_scheduler_leader"


apiserver = apiservers.apiserver_fixture("function")


def held_lease(client: Client, name: str = LEASE, namespace: str = "kube-system") -> dict[str, Any]:
    """Wait for the Lease to be held; its spec."""
    watch: Watch[dict[str, Any]] = Watch(client, resources.LEASES, namespace, raw)

    def held(leases: list[dict[str, Any]]) -> bool:
        return any(x["metadata"]["name"] == name and x["spec"].get("holderIdentity") for x in leases)

    try:
        leases = watch.wait_for(held, "a leader")
    finally:
        watch.stop()
    return dict(next(x for x in leases if x["metadata"]["name"] == name)["spec"])


def holder(client: Client) -> str:
    """Wait for the scheduler Lease to be held; its holder's identity."""
    return str(held_lease(client)["holderIdentity"])


def test_only_the_leader_binds_and_killing_it_hands_over(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    create_gpu_nodes(client, "le-a", "le-b")
    ns = create_namespace(client)
    replicas = {
        name: SchedulerProcess(apiserver.kubeconfig, work_dir, name=name, leader_elect=True, lease=(3.0, 2.0, 0.5))
        for name in ("sched-a", "sched-b")
    }
    watch = PodWatch(client, ns)
    try:
        for replica in replicas.values():
            replica.start()
        leader = replicas[holder(client)]
        follower = next(r for r in replicas.values() if r is not leader)
        wait_for(lambda: leader.metric(LEADER) == 1, what="the leader to start scheduling", timeout_s=90)
        for i in range(8):
            create_pod(client, ns, f"first-{i}", GPU_QUARTER)
        watch.wait_bound(8)
        wait_for(lambda: leader.metric(BOUND, BINDS) == 8, what="the leader's 8 bindings", timeout_s=90)
        assert follower.metric(BOUND) == 0 and follower.metric(LEADER) == 0
        # The follower's cache is warm: it explains a pod the leader bound.
        with grpc.insecure_channel(follower.grpc_address) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            wait_for(
                lambda: stub.Explain(pb.ExplainRequest(namespace=ns, name="first-0"), timeout=10).state == "bound",
                what="the follower to know first-0 is bound",
                timeout_s=90,
            )
            assert not stub.ListPending(pb.ListPendingRequest(namespace=ns), timeout=10).leader

        leader.kill()
        for i in range(8):
            create_pod(client, ns, f"second-{i}", GPU_QUARTER)
        pods = watch.wait_bound(16)
        assert holder(client) == follower.name
        wait_for(lambda: follower.metric(BOUND, BINDS) == 8, what="the new leader's 8 bindings", timeout_s=90)
        assert_no_device_shared_beyond_capacity(client, pods)
    finally:
        watch.stop()
        for replica in replicas.values():
            replica.stop()


def test_a_leader_that_cannot_renew_exits(apiserver: EmbeddedAPIServer, client: Client, work_dir: Path) -> None:
    scheduler = SchedulerProcess(apiserver.kubeconfig, work_dir, leader_elect=True, lease=(3.0, 1.0, 0.25))
    scheduler.start()
    try:
        assert holder(client) == scheduler.name
        apiserver.kill()  # the Lease can no longer be renewed
        assert scheduler.wait_exit(60) == 1
        assert "Lost leadership" in scheduler.log_tail()
    finally:
        scheduler.stop()
        apiserver.start()


def test_kube_scheduler_flags_pick_the_lease_and_the_identity_holds_it(
    apiserver: EmbeddedAPIServer, client: Client, work_dir: Path
) -> None:
    """The whole flag set in kube-scheduler's syntax; the identity flag wins over POD_NAME (which
    the launcher sets to the process's name)."""
    flags = (
        "--leader-elect=true",
        "--leader-elect-lease-duration=6s",
        "--leader-elect-renew-deadline=4s",
        "--leader-elect-retry-period=500ms",
        "--leader-elect-resource-name=flagged-lease",
        "--leader-elect-resource-namespace=default",
        "--leader-elect-identity=replica-from-flag",
    )
    scheduler = SchedulerProcess(apiserver.kubeconfig, work_dir, name="sched-pod", extra_args=flags)
    scheduler.start()
    try:
        spec = held_lease(client, "flagged-lease", "default")
        assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("replica-from-flag", 6)
        wait_for(lambda: scheduler.metric(LEADER) == 1, what="the holder to start scheduling", timeout_s=90)
        assert client.resource(resources.LEASES).list(namespace="kube-system").items == []  # no other Lease
    finally:
        scheduler.stop()
