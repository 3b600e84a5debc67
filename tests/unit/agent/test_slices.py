"""The node's DRA pools (agent/devices/slices.py) and kube's rules for writing them (slicepool.py): pure."""

from __future__ import annotations

import dataclasses

import pytest

from agent.devices.cr import build_device
from agent.devices.slicepool import decode_index, encode_index, index_length, node_owner, plan, split
from agent.devices.slices import Pool, build_pools, semver
from agent.discovery.model import Inventory
from agent.discovery.simulated import load_profile
from agent.health.tracker import Health
from apis.crds.device import DeviceType
from apis.dra import gpus, nics
from apis.dra import names as dra_names
from apis.dra.allocation import DeviceID
from apis.dra.slice import Device, DeviceTaint, ResourcePool, ResourceSlice
from apis.extension import names
from apis.k8s.meta import ObjectMeta

NODE = "gpu-1"
SICK = Health(healthy=False, reason="Xid79", message="fell off the bus", since="2025-01-02T03:04:05Z")


def inventory(profile: str = "a100-8x") -> Inventory:
    return load_profile(profile).inventory(NODE)


@pytest.mark.parametrize("profile", ["a100-8x", "h100-8x", "a100-pcie-4x", "t4-2x"])
def test_the_pools_match_the_device_cr_device_for_device(profile: str) -> None:
    inv = inventory(profile)
    health = {inv.gpus[0].uuid: SICK, **({inv.rdma[0].bus_id: SICK} if inv.rdma else {})}
    cr = build_device(inv, health, node_name=NODE)
    gpu_pool, rdma_pool = build_pools(inv, health, node_name=NODE)
    by_minor = {gpus.minor_of(d): d for d in gpu_pool.devices}
    assert len(by_minor) == len(gpu_pool.devices) == len(cr.of_type(DeviceType.GPU))
    for entry in cr.of_type(DeviceType.GPU):
        device = by_minor[entry.minor]
        assert device.attributes[gpus.UUID].value == entry.id
        assert device.attributes[dra_names.PCIE_ROOT].value == entry.topology.pcie_id
        assert device.attributes[gpus.NUMA_NODE].value == entry.topology.node_id
        assert bool(device.taints) is (not entry.health)
        if entry.health:
            assert device.capacity[gpus.MEMORY].value.amount == entry.resources[names.GPU_MEMORY]
            assert device.capacity[gpus.CORES].value.amount == entry.resources[names.GPU_CORE]
    pfs = {
        d.attributes[dra_names.PCI_BUS_ID].value: d for d in rdma_pool.devices if d.attributes[nics.TYPE].value == "pf"
    }
    assert sorted(pfs) == sorted(e.id for e in cr.of_type(DeviceType.RDMA))
    for entry in cr.of_type(DeviceType.RDMA):
        vfs = [d for d in rdma_pool.devices if d.name.startswith(f"{pfs[entry.id].name}-vf-")]
        assert len(vfs) == sum(len(g.vfs) for g in entry.vf_groups)
        assert all(bool(d.taints) is (not entry.health) for d in [pfs[entry.id], *vfs])


def test_a_gpu_device_follows_the_allocators_convention() -> None:
    inv = inventory("h100-8x")
    [gpu] = [d for d in build_pools(inv, {}, node_name=NODE)[0].devices if d.name == "gpu-5"]
    assert gpu.allow_multiple_allocations
    assert {k: str(v.value) for k, v in gpu.capacity.items()} == {"cores": "100", "memory": "81559Mi"}
    values = {k: a.value for k, a in gpu.attributes.items()}
    assert values == {
        "minor": 5,
        "uuid": inv.gpus[5].uuid,
        "productName": "NVIDIA H100 80GB HBM3",
        "architecture": "Hopper",
        "driverVersion": semver(inv.gpu_driver_version),
        "numaNode": 1,
        "nvlinkGroup": 0,
        "resource.kubernetes.io/pcieRoot": inv.gpus[5].topology.pcie_id,
        "resource.kubernetes.io/pciBusID": inv.gpus[5].bus_id,
    }
    # the allocator's bridge finds it by its minor: a Koordinator pod's half GPU is a share of it
    pool = ResourceSlice(ObjectMeta(name="s"), gpus.DRIVER, ResourcePool(NODE, 1, 1), node_name=NODE, devices=(gpu,))
    held = gpus.held_by_koordinator({5: {names.GPU_CORE: 50, names.GPU_MEMORY: 2**30}}, [pool], node=NODE)
    device = DeviceID(gpus.DRIVER, NODE, "gpu-5")
    assert device not in held.exclusive  # shared, not held whole
    assert (held.consumed(device, gpus.CORES), held.consumed(device, gpus.MEMORY)) == (50, 2**30)


def test_nvlink_groups_are_the_lowest_minor_of_each_nvlink_domain() -> None:
    groups = {
        d.name: d.attributes.get(gpus.NVLINK_GROUP)
        for d in build_pools(inventory("a100-pcie-4x"), {}, node_name=NODE)[0].devices
    }
    assert {k: None if v is None else v.value for k, v in groups.items()} == {
        "gpu-0": 0,
        "gpu-1": 0,
        "gpu-2": 2,
        "gpu-3": 2,
    }
    t4 = build_pools(inventory("t4-2x"), {}, node_name=NODE)[0].devices
    assert all(gpus.NVLINK_GROUP not in d.attributes for d in t4)  # no NVLink: no group


def test_an_unhealthy_gpu_is_tainted_no_schedule_with_its_reason_and_time() -> None:
    inv = inventory()
    [device] = [d for d in build_pools(inv, {inv.gpus[2].uuid: SICK}, node_name=NODE)[0].devices if d.taints]
    assert device.name == "gpu-2"
    assert device.taints == (DeviceTaint(gpus.UNHEALTHY_TAINT, "NoSchedule", "Xid79", SICK.since),)
    assert device.capacity  # still listed, with its capacity: running claims keep it


@pytest.mark.parametrize(
    ("version", "wanted"),
    [("535.161.08", "535.161.8"), ("550.54", "550.54.0"), ("560", "560.0.0"), ("", ""), ("r535", ""), ("1.2.3.4", "")],
)
def test_driver_versions_become_semver(version: str, wanted: str) -> None:
    assert semver(version) == wanted


# --- kube's rules ---------------------------------------------------------------------------------


def devices(n: int, *, tainted: bool = False) -> tuple[Device, ...]:
    taints = (DeviceTaint(gpus.UNHEALTHY_TAINT, "NoSchedule"),) if tainted else ()
    return tuple(Device(name=f"gpu-{i}", taints=taints) for i in range(n))


def served(created: ResourceSlice, name: str, rv: str = "1") -> ResourceSlice:
    """`created` as the API server returns it."""
    meta = dataclasses.replace(created.meta, name=name, generate_name="", uid=f"uid-{name}", resource_version=rv)
    return dataclasses.replace(created, meta=meta)


def publish(pool: Pool, existing: list[ResourceSlice]) -> list[ResourceSlice]:
    """Apply a plan as the server would: what is on the server afterwards."""
    p = plan(pool, existing, node_name=NODE)
    gone = {s.name for s in p.deletes} | {s.name for s in p.updates}
    after = [s for s in existing if s.name not in gone] + list(p.updates)
    return after + [served(c, f"{c.meta.generate_name}x{i}") for i, c in enumerate(p.creates)]


def test_the_first_publication_creates_a_slice_at_generation_one() -> None:
    p = plan(Pool(gpus.DRIVER, NODE, devices(2)), [], node_name=NODE, owner=node_owner(NODE, "uid-1"))
    [created] = p.creates
    assert created.meta.generate_name == f"00000-{gpus.DRIVER}-{NODE}-"
    assert created.pool == ResourcePool(NODE, 1, 1)
    assert (created.node_name, created.driver, created.devices) == (NODE, gpus.DRIVER, devices(2))
    [owner] = created.meta.owner_references
    assert (owner.kind, owner.uid, owner.controller, owner.block_owner_deletion) == ("Node", "uid-1", True, None)


def test_an_equal_pool_plans_nothing() -> None:
    pool = Pool(gpus.DRIVER, NODE, devices(3))
    assert plan(pool, publish(pool, []), node_name=NODE).empty


def test_a_taint_updates_in_place_and_a_changed_device_set_bumps_the_generation() -> None:
    on_server = publish(Pool(gpus.DRIVER, NODE, devices(3)), [])
    tainted = plan(Pool(gpus.DRIVER, NODE, devices(3, tainted=True)), on_server, node_name=NODE)
    assert (len(tainted.updates), tainted.creates, tainted.deletes, tainted.generation) == (1, (), (), 1)
    fewer = plan(Pool(gpus.DRIVER, NODE, devices(2)), on_server, node_name=NODE)
    assert [u.pool for u in fewer.updates] == [ResourcePool(NODE, 2, 1)]


def test_a_large_pool_spans_slices_and_shrinking_it_deletes_the_surplus() -> None:
    assert [len(s) for s in split(devices(130))] == [128, 2]
    assert [len(s) for s in split(devices(130, tainted=True))] == [64, 64, 2]  # kube's limit with taints
    on_server = publish(Pool(nics.DRIVER, NODE, devices(130, tainted=True)), [])
    assert [s.pool for s in on_server] == [ResourcePool(NODE, 1, 3)] * 3
    shrunk = plan(Pool(nics.DRIVER, NODE, devices(60, tainted=True)), on_server, node_name=NODE)
    assert [s.name.split("-")[0] for s in shrunk.deletes] == ["00001", "00002"]
    assert [u.pool for u in shrunk.updates] == [ResourcePool(NODE, 2, 1)]


def test_slices_of_an_old_generation_another_pool_or_a_foreign_name_are_obsolete() -> None:
    pool = Pool(gpus.DRIVER, NODE, devices(1))
    [current] = publish(pool, [])
    old = dataclasses.replace(served(current, "00000-old"), pool=ResourcePool(NODE, 0, 1))
    other_pool = dataclasses.replace(served(current, "00000-other"), pool=ResourcePool("elsewhere", 5, 1))
    foreign = served(current, "hand-made")
    p = plan(pool, [current, old, other_pool, foreign], node_name=NODE)
    assert sorted(s.name for s in p.deletes) == ["00000-old", "00000-other", "hand-made"]
    assert (p.updates, p.creates) == ((), ())


def test_an_empty_pool_deletes_its_slices() -> None:
    on_server = publish(Pool(nics.DRIVER, NODE, devices(2)), [])
    p = plan(Pool(nics.DRIVER, NODE, ()), on_server, node_name=NODE)
    assert ([s.name for s in p.deletes], p.updates, p.creates) == ([on_server[0].name], (), ())


def test_a_taint_without_time_added_keeps_the_servers() -> None:
    pool = Pool(gpus.DRIVER, NODE, devices(1, tainted=True))
    [current] = publish(pool, [])
    stamped = dataclasses.replace(
        current,
        devices=(
            dataclasses.replace(
                current.devices[0], taints=(DeviceTaint(gpus.UNHEALTHY_TAINT, "NoSchedule", time_added="T"),)
            ),
        ),
    )
    assert plan(pool, [stamped], node_name=NODE).empty


def test_slice_names_start_with_their_index() -> None:
    assert (index_length(1), index_length(0x10000), index_length(0x10001)) == (5, 5, 5 + 0)
    assert index_length(0x100001) == 6
    assert encode_index(10, 5) == "0000a"
    assert decode_index("0000a-gpu.tessera.dev-n-xyz", 5) == 10
    assert decode_index("000a-gpu", 5) is None
    assert decode_index("zzzzz-gpu", 5) is None
