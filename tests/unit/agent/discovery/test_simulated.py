"""Simulated profiles: built-ins, files, validation, and agreement with real-path discovery."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from agent.discovery.nvml import NVMLSource
from agent.discovery.nvmllib import NVML
from agent.discovery.pci import PCIBus
from agent.discovery.rdma import RDMASource
from agent.discovery.simulated import BUILTIN_PROFILES, NodeCapacity, SimulatedSource, load_profile
from apis.errors import ConfigError
from tests.support.sysfs_tree import SysfsTree


@dataclasses.dataclass(frozen=True)
class Shape:
    gpus: int
    rdma: int
    model: str
    memory: int
    numa_nodes: int
    pcie_roots: int


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("a100-8x", Shape(8, 4, "A100-SXM4-80GB", 80 * 2**30, 2, 4)),
        ("h100-8x", Shape(8, 8, "H100-80GB-HBM3", 81559 * 2**20, 2, 4)),
        ("a100-pcie-4x", Shape(4, 2, "A100-80GB-PCIe", 80 * 2**30, 2, 2)),
        ("t4-2x", Shape(2, 0, "Tesla-T4", 15 * 2**30, 1, 1)),
    ],
    ids=BUILTIN_PROFILES,
)
def test_builtin_profiles_are_realistic_nodes(name: str, shape: Shape) -> None:
    inventory = load_profile(name).inventory("node-a")
    assert inventory.simulated
    assert [g.minor for g in inventory.gpus] == list(range(shape.gpus))
    assert [r.minor for r in inventory.rdma] == list(range(shape.rdma))
    assert {g.model for g in inventory.gpus} == {shape.model}
    assert {g.memory_bytes for g in inventory.gpus} == {shape.memory}
    assert len({g.topology.node_id for g in inventory.gpus}) == shape.numa_nodes
    assert len({g.topology.pcie_id for g in inventory.gpus}) == shape.pcie_roots
    for nic in inventory.rdma:  # each NIC shares a PCIe root with GPUs, for joint allocation
        assert nic.ports_active and nic.vfs and nic.netdev is not None
        assert nic.topology.pcie_id in {g.topology.pcie_id for g in inventory.gpus}


def test_uuids_are_stable_per_node_and_distinct_across_nodes() -> None:
    profile = load_profile("a100-8x")
    a, again, b = (profile.inventory(n).gpus for n in ("node-a", "node-a", "node-b"))
    assert [g.uuid for g in a] == [g.uuid for g in again]
    assert not {g.uuid for g in a} & {g.uuid for g in b}
    assert len({g.uuid for g in a}) == 8


def test_source_logs_that_devices_are_simulated(caplog: pytest.LogCaptureFixture) -> None:
    SimulatedSource(load_profile("t4-2x"), "node-a")
    record = next(r for r in caplog.records if "SIMULATED" in r.getMessage())
    assert record.levelno == logging.WARNING and getattr(record, "profile", None) == "t4-2x"


@pytest.mark.parametrize(
    ("name", "peers"),
    [
        ("a100-8x", [tuple(m for m in range(8) if m != g) for g in range(8)]),  # NVSwitch: all to all
        ("h100-8x", [tuple(m for m in range(8) if m != g) for g in range(8)]),
        ("a100-pcie-4x", [(1,), (0,), (3,), (2,)]),  # NVLink bridges: pairs
        ("t4-2x", [(), ()]),
    ],
    ids=["a100-8x", "h100-8x", "a100-pcie-4x", "t4-2x"],
)
def test_profiles_say_which_gpus_nvlink_joins(name: str, peers: list[tuple[int, ...]]) -> None:
    assert [g.nvlink_peers for g in load_profile(name).inventory("n").gpus] == peers


def test_nvlink_groups_must_name_gpus_once(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    layout = "numaNodes: [{pcieRoots: [{root: pci0000:00, gpus: ['0000:00:04.0', '0000:00:05.0']}]}]\n"
    for groups in ("[[0, 2]]", "[[0, 1], [1]]", "[[0, 0]]"):
        path.write_text(f"gpu: {{nvlink: {groups}}}\n{layout}")
        with pytest.raises(ConfigError, match=r"gpu.nvlink\[\d\] must name GPU minors below 2, each in one group"):
            load_profile(str(path))


@pytest.mark.parametrize("name", ["a100-8x", "a100-pcie-4x"])
def test_simulated_inventory_matches_discovering_the_same_node_for_real(tmp_path: Path, name: str) -> None:
    """The profile written as sysfs + its fake NVML, discovered by the real sources, gives the
    same GPUs and NICs as the simulated source reports (bar the simulated flag and netlink)."""
    profile = load_profile(name)
    tree = SysfsTree(tmp_path / "sys").write(profile)
    nvml = NVML(profile.fake_nvml("node-a"))
    nvml.init()
    bus = PCIBus(tree.root)
    real = NVMLSource(nvml, bus).discover().merged(RDMASource(bus).discover())
    simulated = profile.inventory("node-a")
    assert real.gpus == simulated.gpus
    assert real.rdma == tuple(dataclasses.replace(r, netdev=None) for r in simulated.rdma)
    assert real.gpu_driver_version == simulated.gpu_driver_version


def test_profile_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "gpu: {name: NVIDIA L4, memory: 24Gi}\n"
        "numaNodes:\n"
        "  - pcieRoots:\n"
        "      - {root: pci0000:00, gpus: ['0000:00:06.0'], nics: [{busID: '0000:00:07.0', ports: [DOWN]}]}\n"
    )
    profile = load_profile(str(path))
    inventory = profile.inventory("n")
    assert profile.name == "mine"
    assert [g.model for g in inventory.gpus] == ["L4"]
    assert [(r.ib_device, r.ports_active) for r in inventory.rdma] == [("mlx5_0", False)]
    assert profile.node == NodeCapacity(cpus=1, memory_bytes=256 * 2**30, pods=110)  # defaults


@pytest.mark.parametrize(
    ("name", "node"),
    [
        ("a100-8x", NodeCapacity(cpus=128, memory_bytes=2**40, pods=110)),
        ("h100-8x", NodeCapacity(cpus=112, memory_bytes=2 * 2**40, pods=110)),
        ("a100-pcie-4x", NodeCapacity(cpus=64, memory_bytes=512 * 2**30, pods=110)),
        ("t4-2x", NodeCapacity(cpus=16, memory_bytes=60 * 2**30, pods=110)),
    ],
    ids=BUILTIN_PROFILES,
)
def test_profiles_size_the_node_the_simulated_kubelet_registers(name: str, node: NodeCapacity) -> None:
    assert load_profile(name).node == node


def test_node_cpus_are_counted_from_every_cpulist(tmp_path: Path) -> None:
    path = tmp_path / "cpus.yaml"
    path.write_text("node: {memory: 8Gi, pods: 20}\nnumaNodes: [{node: 0, cpus: '0-3,8-11'}, {node: 1, cpus: '16'}]\n")
    assert load_profile(str(path)).node == NodeCapacity(cpus=9, memory_bytes=8 * 2**30, pods=20)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu: [1]", "gpu must be a mapping"),
        ("numaNodes: {a: 1}", "numaNodes must be a list"),
        ("numaNodes: [{pcieRoots: [{root: x}]}]", r"numaNodes\[0\].pcieRoots\[0\].root must look like pci0000:3a"),
        ("numaNodes: [{pcieRoots: [{root: pci0000:00, gpus: ['3b:00.0']}]}]", "must be a PCI address"),
        (
            "numaNodes: [{pcieRoots: [{root: pci0000:00, gpus: ['0000:00:01.0', '0000:00:01.0']}]}]",
            "bus ids used twice: 0000:00:01.0",
        ),
        ("gpu: {memory: lots}", "gpu.memory"),
        ("numaNodes: [{node: -1}]", r"numaNodes\[0\].node must be a non-negative integer"),
        ("a: [", "not valid YAML"),
        ("numaNodes: [{cpus: 3-1}]", r"numaNodes\[node=0\].cpus must be a cpulist like 0-63, got '3-1'"),
        ("node: {memory: lots}", "node.memory"),
        ("node: {pods: many}", "node.pods must be a non-negative integer"),
        ("isolationProvider: hami", "isolationProvider must be 'HAMi-core' \\(or absent\\), got 'hami'"),
        (
            "gpu: {architecture: Fermi}",
            "gpu.architecture must be one of Kepler, .*Blackwell \\(or absent\\), got 'Fermi'",
        ),
    ],
    ids=[
        "gpu-not-mapping",
        "numa-not-list",
        "bad-root",
        "bad-bus-id",
        "duplicate-bus",
        "bad-memory",
        "bad-node",
        "yaml",
        "bad-cpulist",
        "bad-node-memory",
        "bad-pods",
        "bad-isolation-provider",
        "bad-architecture",
    ],
)
def test_bad_profiles_are_config_errors_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_profile(str(path))


def test_unknown_profile_name_lists_the_builtins() -> None:
    with pytest.raises(ConfigError, match="not a built-in profile \\(a100-8x, h100-8x, a100-pcie-4x, t4-2x\\)"):
        load_profile("v100-4x")
