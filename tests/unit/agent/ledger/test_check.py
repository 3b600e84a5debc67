"""The pure collision check: which claims fit beside what pods hold on a node, and what it says."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agent.discovery.model import GPU, Inventory, RDMADevice
from agent.health.tracker import Health
from agent.ledger import CollisionKind, NodeSlots, RDMASlot, collisions
from apis.crds.device import DeviceTopology, DeviceType
from apis.extension.allocation import DeviceAllocation
from tests.unit.agent.ledger.claims import GI, claim, held, make_node, nic, share

NODE = make_node()


@pytest.mark.parametrize(
    ("cores", "fits"),
    [((50, 50), True), ((30, 30, 40), True), ((50, 51), False), ((1, 100), False)],
    ids=["50+50", "30+30+40", "50+51", "1+100"],
)
def test_core_shares_add_up_to_exactly_100(cores: tuple[int, ...], fits: bool) -> None:
    *holding, asking = cores
    holders = [claim(f"ns/h{i}", share(0, core=c, memory=GI)) for i, c in enumerate(holding)]
    found = collisions(claim("ns/x", share(0, core=asking, memory=GI)), held(*holders), NODE)
    assert (found == ()) is fits
    assert all(c.kind is CollisionKind.OVERCOMMITTED for c in found)


def test_memory_shares_may_not_pass_the_gpus_memory() -> None:
    holders = held(claim("ns/a", share(0, core=10, memory=40 * GI)))
    assert collisions(claim("ns/x", share(0, core=10, memory=40 * GI)), holders, NODE) == ()
    (found,) = collisions(claim("ns/x", share(0, core=10, memory=40 * GI + 1)), holders, NODE)
    assert found.kind is CollisionKind.OVERCOMMITTED


def test_a_ratio_only_share_counts_its_part_of_the_memory() -> None:
    holders = held(claim("ns/a", share(0, ratio=60)))  # 48Gi of 80Gi, no compute
    assert collisions(claim("ns/x", share(0, core=100, memory=32 * GI)), holders, NODE) == ()
    assert collisions(claim("ns/x", share(0, core=100, memory=33 * GI)), holders, NODE) != ()


def test_the_reported_case_gpu_0_half_held_and_asked_whole() -> None:
    holders = held(claim("tessera-demo/infer-half-a", share(0, core=50, memory=40 * GI, ratio=50)))
    (found,) = collisions(claim("tessera-demo/x", share(0, core=100, memory=80 * GI, ratio=100)), holders, NODE)
    assert found.kind is CollisionKind.OVERCOMMITTED
    assert (found.type, found.minor, found.holders) == (DeviceType.GPU, 0, ("tessera-demo/infer-half-a",))
    assert found.message == (
        "GPU 0 (GPU-0) of node sim-1 is already held by tessera-demo/infer-half-a (50% core, 40Gi): "
        "tessera-demo/x asks for 100% core, 80Gi, 50% core, 40Gi free"
    )


@pytest.mark.parametrize(
    ("holder", "asker"),
    [(share(0), share(0, core=10, memory=GI)), (share(0, core=10, memory=GI), share(0)), (share(0), share(0))],
    ids=["whole-held-share-asked", "share-held-whole-asked", "whole-held-whole-asked"],
)
def test_a_whole_gpu_leaves_nothing_to_share(holder: DeviceAllocation, asker: DeviceAllocation) -> None:
    (found,) = collisions(claim("ns/x", asker), held(claim("ns/a", holder)), NODE)
    assert found.kind is CollisionKind.OVERCOMMITTED


def test_a_memory_only_share_does_not_fit_beside_a_whole_gpu() -> None:
    (found,) = collisions(claim("ns/x", share(0, memory=GI)), held(claim("ns/a", share(0))), NODE)
    assert "ns/a (100% core, 80Gi)" in found.message and "0% core, 0 free" in found.message


def test_other_gpus_are_not_affected() -> None:
    holders = held(claim("ns/a", share(0), share(1)))
    assert collisions(claim("ns/x", share(2), share(3)), holders, NODE) == ()


def test_the_same_pods_second_container_is_not_a_collision_with_itself() -> None:
    first = claim("ns/x", share(0, core=100, memory=80 * GI))
    assert collisions(first, held(first), NODE) == ()


def test_several_holders_are_named_and_several_gpus_reported() -> None:
    b = replace(claim("ns/b", share(0, core=25, memory=20 * GI)), key="uid-0")  # names order holders, not keys
    holders = held(b, claim("ns/a", share(0, core=25, memory=20 * GI), share(1)))
    found = collisions(claim("ns/x", share(0), share(1), share(2)), holders, NODE)
    assert [(c.minor, c.holders) for c in found] == [(0, ("ns/a", "ns/b")), (1, ("ns/a",))]
    assert "held by ns/a (25% core, 20Gi), ns/b (25% core, 20Gi)" in found[0].message


def test_a_claim_larger_than_the_gpu_collides_even_alone() -> None:
    (found,) = collisions(claim("ns/x", share(0, core=150, memory=GI)), {}, NODE)
    assert found.holders == ()
    assert found.message == "GPU 0 (GPU-0) of node sim-1 has 100% core, 80Gi: ns/x asks for 150% core, 1Gi"


def test_a_gpu_the_node_lacks_is_refused() -> None:
    (found,) = collisions(claim("ns/x", share(9)), {}, make_node(gpus=2))
    assert found.kind is CollisionKind.UNKNOWN_DEVICE
    assert found.message == "GPU 9 is not on node sim-1 (its GPUs: 0, 1)"
    (none,) = collisions(claim("ns/x", share(0)), {}, make_node(gpus=0))
    assert none.message == "GPU 0 is not on node sim-1 (it has no GPUs)"


class TestUnhealthyGPU:
    NODE = make_node(faults={3: "Xid79: GPU has fallen off the bus"})

    def test_a_new_pod_is_refused(self) -> None:
        (found,) = collisions(claim("ns/x", share(3, core=10, memory=GI)), {}, self.NODE)
        assert found.kind is CollisionKind.UNHEALTHY
        assert found.message == (
            "GPU 3 (GPU-3) of node sim-1 is unhealthy (Xid79: GPU has fallen off the bus): no new pod may "
            "start on it, only pods that held it before the fault keep running; ns/x asks for 10% core, 1Gi"
        )

    def test_a_pod_that_held_it_before_the_fault_keeps_it(self) -> None:
        running = claim("ns/x", share(3, core=10, memory=GI))
        assert collisions(running, held(running), self.NODE) == ()

    def test_a_pod_holding_another_gpu_is_still_new_on_this_one(self) -> None:
        before = claim("ns/x", share(2))
        (found,) = collisions(claim("ns/x", share(2), share(3)), held(before), self.NODE)
        assert (found.kind, found.minor) == (CollisionKind.UNHEALTHY, 3)

    def test_healthy_gpus_of_the_node_are_unaffected(self) -> None:
        assert collisions(claim("ns/x", share(2)), {}, self.NODE) == ()


class TestRDMA:
    NODE = make_node(rdma=2)

    def test_vfs_are_given_once_each(self) -> None:
        holders = held(claim("ns/a", rdma=[nic(0, rdma=1, vfs=["0000:3b:00.2"])]))
        assert collisions(claim("ns/x", rdma=[nic(0, rdma=1, vfs=["0000:3b:00.3"])]), holders, self.NODE) == ()
        (found,) = collisions(claim("ns/x", rdma=[nic(0, rdma=1, vfs=["0000:3b:00.2"])]), holders, self.NODE)
        assert found.kind is CollisionKind.VF_TAKEN
        assert found.message == (
            "RDMA 0 (0000:3b:00.0) of node sim-1: VF 0000:3b:00.2 is already held by ns/a: ns/x asks for it too"
        )

    def test_a_whole_nic_excludes_vfs_and_other_wholes(self) -> None:
        holders = held(claim("ns/a", rdma=[nic(0)]))
        (found,) = collisions(claim("ns/x", rdma=[nic(0, rdma=1, vfs=["0000:3b:00.2"])]), holders, self.NODE)
        assert found.kind is CollisionKind.OVERCOMMITTED
        assert found.message.endswith("already held by ns/a (rdma 100): ns/x asks for rdma 1, rdma 0 free")
        assert collisions(claim("ns/x", rdma=[nic(1)]), holders, self.NODE) == ()

    def test_unknown_and_unhealthy_nics(self) -> None:
        node = NodeSlots(self.NODE.node, {}, {0: RDMASlot(0, "0000:3b:00.0", "PortNotActive")})
        kinds = [c.kind for c in collisions(claim("ns/x", rdma=[nic(0), nic(5)]), {}, node)]
        assert kinds == [CollisionKind.UNHEALTHY, CollisionKind.UNKNOWN_DEVICE]


def test_node_slots_from_inventory_and_health() -> None:
    topology = DeviceTopology(socket_id=0, node_id=0, pcie_id="pci0000:03", bus_id="0000:07:00.0")
    inventory = Inventory(
        gpus=(GPU("GPU-a", 0, "NVIDIA A100", 80 * GI, topology), GPU("GPU-b", 1, "NVIDIA A100", 80 * GI, topology)),
        rdma=(RDMADevice("0000:0c:00.0", 0, "mlx5_0", topology),),
    )
    health = {
        "GPU-b": Health(healthy=False, reason="Xid79", message="GPU has fallen off the bus"),
        "GPU-a": Health(healthy=True, reason="Recovered"),
    }
    node = NodeSlots.of(inventory, health, node="n")
    assert [(g.uuid, g.memory_bytes, g.healthy) for g in node.gpus.values()] == [
        ("GPU-a", 80 * GI, True),
        ("GPU-b", 80 * GI, False),
    ]
    assert node.gpus[1].fault == "Xid79: GPU has fallen off the bus"
    assert node.rdma[0].bus_id == "0000:0c:00.0" and node.rdma[0].healthy
