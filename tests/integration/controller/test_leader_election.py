"""Two `tessera controller --leader-elect` replicas: only the leader writes, the follower keeps warm
caches and takes over when the leader goes away (at once on a clean stop, which releases the
Lease; after the lease duration on a crash)."""

from collections.abc import Callable

import pytest

from apis.extension import names
from cli.launchers.base import leader_election_flags
from cli.launchers.controller import ControllerProcess
from kube.client import Client
from kube.resources import LEASES
from tests.integration.controller.nodes import build, create_node, managed, node_resources, put_device, writes
from tests.support.cluster import unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def two_replicas(start: Callable[..., ControllerProcess]) -> tuple[ControllerProcess, ControllerProcess]:
    """Two replicas on a fresh Lease, once one of them leads: (leader, follower)."""
    lease = unique("tessera-controller")
    pair = [start(*leader_election_flags(name=lease, namespace="default", identity=f"replica-{i}")) for i in range(2)]
    leader = leader_of(pair)
    return leader, next(p for p in pair if p is not leader)


def leader_of(processes: list[ControllerProcess]) -> ControllerProcess:
    """The one replica that runs its controllers, once there is exactly one."""
    leading: list[ControllerProcess] = []

    def one() -> bool:
        leading[:] = [p for p in processes if p.metric("tessera_controller_leader") == 1]
        return len(leading) == 1

    wait_for(one, what="exactly one leader")
    return leading[0]


def converged(client: Client, node: str, gpu_core: str) -> Callable[[], bool]:
    return lambda: managed(node_resources(client, node)).get(names.GPU_CORE) == gpu_core


def test_only_the_leader_writes_and_a_crash_hands_over(
    client: Client, start_controller: Callable[..., ControllerProcess]
) -> None:
    leader, follower = two_replicas(start_controller)
    nodes = [unique("le") for _ in range(5)]
    for node in nodes:
        create_node(client, node)
        put_device(client, build(node))
    for node in nodes:
        wait_for(converged(client, node, "800"), what=f"{node} to converge")
    # The Node can show a write before the writer has counted it: wait for the count, not assert.
    wait_for(lambda: writes(leader) > 0, what="the leader to count its writes")
    assert follower.metric("tessera_controller_reconcile_total") == 0, follower.log_tail()  # it never ran a reconcile
    assert writes(follower) == 0
    assert follower.get("/readyz")[0] == 200  # warm: caches synced, ready to take over

    leader.kill()  # no chance to release the Lease: the follower waits for it to expire
    assert leader_of([follower]) is follower
    put_device(client, build(nodes[0], unhealthy=(5,)))
    wait_for(converged(client, nodes[0], "700"), what="the new leader to apply a change")
    wait_for(lambda: writes(follower) > 0, what="the new leader to count its writes")


def test_a_clean_stop_releases_the_lease_to_the_follower(
    client: Client, start_controller: Callable[..., ControllerProcess]
) -> None:
    leader, follower = two_replicas(start_controller)
    assert leader.terminate() == 0
    assert leader_of([follower]) is follower
    node = unique("le")
    create_node(client, node)
    put_device(client, build(node, "t4-2x"))
    wait_for(converged(client, node, "200"), what="the new leader to reconcile")


def test_kube_controller_manager_flags_pick_the_lease_and_the_identity_holds_it(
    client: Client, start_controller: Callable[..., ControllerProcess]
) -> None:
    """The whole flag set in kube-controller-manager's syntax, durations as Go writes them."""
    lease = unique("tessera-controller")
    process = start_controller(
        "--leader-elect=true",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=500ms",
        f"--leader-elect-resource-name={lease}",
        "--leader-elect-resource-namespace=default",
        "--leader-elect-identity=controller-from-flag",
    )
    assert leader_of([process]) is process
    spec = client.resource(LEASES).get(lease, namespace="default")["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("controller-from-flag", 4)
