"""The GPU map: who holds which fraction of which GPU, switches, NVLink, health, and totals."""

from __future__ import annotations

import dataclasses

import pytest

from apis.crds.device import DeviceType
from apis.dra import gpus
from apis.dra.claim import ResourceClaim
from apis.extension import names, partitions
from apis.extension.devicerequest import DeviceRequest
from dashboard import gpumap
from tests.support.gpuobjects import GPU_MEMORY, make_device, make_pod


def whole(count: int) -> DeviceRequest:
    return DeviceRequest(DeviceType.GPU, count, {names.GPU_CORE: 100, names.GPU_MEMORY_RATIO: 100})


def share(core: int) -> DeviceRequest:
    return DeviceRequest(DeviceType.GPU, 1, {names.GPU_CORE: core, names.GPU_MEMORY_RATIO: core}, shared=True)


def test_pods_fill_the_gpus_their_annotation_names_on_their_node() -> None:
    pods = [
        make_pod("a", node="n1", gpus={0: 50}),
        make_pod("b", node="n1", gpus={0: 25, 1: 100}),
        make_pod("c", node="n2", gpus={3: 100}),
    ]
    built = gpumap.build([make_device("n2"), make_device("n1")], pods)
    assert [n.name for n in built.nodes] == ["n1", "n2"]
    n1 = {g.minor: g for g in built.nodes[0].gpus}
    assert [(s.pod, s.core) for s in n1[0].shares] == [("default/a", 50), ("default/b", 25)]
    assert n1[0].used_core == 75 and n1[0].free_core == 25
    assert n1[0].shares[0].memory == GPU_MEMORY // 2
    assert [s.pod for s in n1[1].shares] == ["default/b"]
    assert [g.minor for g in built.nodes[1].gpus if g.shares] == [3]


@pytest.mark.parametrize(
    "pod",
    [make_pod("pending", gpus={0: 50}), make_pod("done", node="n1", gpus={0: 50}, phase="Succeeded")],
    ids=["not-bound", "terminal"],
)
def test_pods_that_hold_nothing_now_are_not_drawn(pod: object) -> None:
    built = gpumap.build([make_device("n1")], [pod])  # type: ignore[list-item]
    assert all(not g.shares for g in built.nodes[0].gpus)


def test_a_malformed_annotation_is_reported_not_raised() -> None:
    bad = make_pod("bad", node="n1", annotations={names.ANNOTATION_DEVICE_ALLOCATED: "{not json"})
    built = gpumap.build([make_device("n1")], [bad, make_pod("ok", node="n1", gpus={1: 100})])
    assert len(built.problems) == 1 and built.problems[0].startswith("default/bad: ")
    assert [g.minor for g in built.nodes[0].gpus if g.shares] == [1]


def test_devices_are_grouped_by_pcie_switch_with_their_nics_and_vfs() -> None:
    pods = [make_pod("mpi", node="n1", gpus={2: 100}, rdma_vfs={1: 1})]
    node = gpumap.build([make_device("n1", gpus=4)], pods).nodes[0]
    assert [(g.pcie, [x.minor for x in g.gpus], [x.minor for x in g.rdma]) for g in node.groups] == [
        ("pci0000:00", [0, 1], [0]),
        ("pci0000:01", [2, 3], [1]),
    ]
    nic = node.groups[1].rdma[0]
    assert (nic.vfs_total, nic.vfs_used, [s.pod for s in nic.shares]) == (4, 1, ["default/mpi"])


def test_unhealthy_gpus_carry_the_agents_reason_and_have_nothing_free() -> None:
    node = gpumap.build([make_device("n1", unhealthy={3: "Xid79"})], []).nodes[0]
    bad = {g.minor: g for g in node.gpus}[3]
    assert (bad.healthy, bad.problem, bad.free_core) == (False, "Xid79", 0)
    assert all(g.problem == "" for g in node.gpus if g.minor != 3)


def test_nvlink_groups_are_the_connected_gpus() -> None:
    node = gpumap.build([make_device("n1", gpus=8, nvlink=[(0, 1, 2, 3), (4, 5)])], []).nodes[0]
    assert node.nvlink == ((0, 1, 2, 3), (4, 5))
    assert [g.nvlink_group for g in node.gpus] == [0, 0, 0, 0, 1, 1, None, None]


def test_idle_capacity_no_pending_request_fits_is_fragmented() -> None:
    # GPU 0 and 1 are half used; 2 and 3 are free. A pending pod wanting 2 whole GPUs can use
    # 2 and 3 but not the halves: those are fragmented.
    pods = [make_pod("a", node="n1", gpus={0: 50}), make_pod("b", node="n1", gpus={1: 50})]
    nodes = gpumap.build([make_device("n1", gpus=4)], pods).nodes
    assert gpumap.fragmented(nodes, [whole(2)]) == {("n1", 0): 50, ("n1", 1): 50}
    assert gpumap.fragmented(nodes, [whole(2), share(50)]) == {}
    assert gpumap.fragmented(nodes, [share(60)]) == {("n1", 0): 50, ("n1", 1): 50}


def test_a_multi_gpu_request_needs_that_many_fitting_gpus_on_one_node() -> None:
    pods = [make_pod("a", node="n1", gpus={0: 100, 1: 100, 2: 100})]
    nodes = gpumap.build([make_device("n1", gpus=4), make_device("n2", gpus=2)], pods).nodes
    assert gpumap.fragmented(nodes, [whole(2)]) == {("n1", 3): 100}


def test_with_nothing_pending_idle_is_not_fragmented() -> None:
    nodes = gpumap.build([make_device("n1")], [make_pod("a", node="n1", gpus={0: 50})]).nodes
    assert gpumap.fragmented(nodes, []) == {}


def test_memory_counts_for_fitting_not_only_cores() -> None:
    # 30% of cores but 90% of memory used: a pod wanting 50% memory does not fit.
    pod = make_pod("a", node="n1", gpus={0: 30})
    pod_memory_heavy = make_pod(
        "m",
        node="n1",
        annotations={
            names.ANNOTATION_DEVICE_ALLOCATED: '{"gpu":[{"minor":1,"resources":{"koordinator.sh/gpu-core":"30",'
            '"koordinator.sh/gpu-memory-ratio":"90","koordinator.sh/gpu-memory":"72Gi"}}]}'
        },
    )
    nodes = gpumap.build([make_device("n1", gpus=2)], [pod, pod_memory_heavy]).nodes
    assert gpumap.fragmented(nodes, [share(50)]) == {("n1", 1): 70}


def test_totals_in_percent_of_a_gpu() -> None:
    pods = [make_pod("a", node="n1", gpus={0: 50, 1: 100})]
    nodes = gpumap.build([make_device("n1", gpus=4, unhealthy={3: "Xid48"})], pods).nodes
    fragments = gpumap.fragmented(nodes, [whole(2)])
    assert gpumap.totals(nodes, fragments) == gpumap.Totals(
        gpus=4, unhealthy_gpus=1, allocated=150, idle=150, fragmented=150, unhealthy=100
    )


def _allocated_claim(name: str, device: str, pod: str | None, consumed: dict[str, str] | None = None) -> ResourceClaim:
    """A claim allocated `device` (`node/gpu-N`) of our driver — a share when `consumed` is given
    — reserved for `pod` (None: for no pod yet)."""
    pool, _, gpu = device.partition("/")
    result: dict[str, object] = {"request": "gpu", "driver": gpus.DRIVER, "pool": pool, "device": gpu}
    if consumed is not None:
        result |= {"shareID": f"share-{name}", "consumedCapacity": consumed}
    status: dict[str, object] = {"allocation": {"devices": {"results": [result]}}}
    if pod is not None:
        status["reservedFor"] = [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}]
    return ResourceClaim.from_dict(
        {
            "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": status,
        }
    )


def test_claims_hold_what_their_allocation_says_beside_koordinator_pods() -> None:
    devices = [make_device("n1"), make_device("n2")]
    slices = [gpus.gpu_slice(d) for d in devices]
    quarter = {"cores": "25", "memory": str(GPU_MEMORY // 4)}
    claims = [
        _allocated_claim("share", "n1/gpu-0", "trainer", quarter),
        _allocated_claim("whole", "n2/gpu-3", None),
    ]
    built = gpumap.build(devices, [make_pod("a", node="n1", gpus={0: 50})], claims=claims, slices=slices)
    n1, n2 = ({g.minor: g for g in n.gpus} for n in built.nodes)
    assert [(s.pod, s.claim, s.core, s.memory_ratio) for s in n1[0].shares] == [
        ("default/a", "", 50, 50),
        ("ml/trainer", "ml/share", 25, 25),
    ]
    assert n1[0].used_core == 75 and n1[0].shares[1].memory == GPU_MEMORY // 4
    # Allocated but reserved for no pod yet: held all the same, by the claim alone.
    assert [(s.pod, s.claim, s.core) for s in n2[3].shares] == [("", "ml/whole", 100)]
    assert gpumap.totals(built.nodes, {}).allocated == 175
    # Without its slice, which node a device is on is unknown: nothing is drawn for it.
    assert not any(g.shares for g in gpumap.build(devices, [], claims=claims, slices=slices[:1]).nodes[1].gpus)


def test_a_pod_on_a_gpu_partition_shows_it() -> None:
    table = partitions.PartitionTable.of({2: [partitions.GPUPartition((0, 1)), partitions.GPUPartition((2, 3))]})
    device = dataclasses.replace(make_device("n1"), gpu_partitions=table)
    pods = [
        make_pod("on", node="n1", gpus={2: 100, 3: 100}),
        make_pod("across", node="n1", gpus={0: 100}),
        make_pod("share", node="n1", gpus={1: 50}),
    ]
    node = gpumap.build([device], pods).nodes[0]
    by_pod = {s.pod: s.partition for g in node.gpus for s in g.shares}
    assert by_pod == {"default/on": "[2,3] (Device annotation, Prefer)", "default/across": "", "default/share": ""}
