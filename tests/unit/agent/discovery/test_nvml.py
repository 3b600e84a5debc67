"""NVML GPU discovery, on the fake NVML and — where a GPU and driver exist — on the real one."""

from __future__ import annotations

import logging
from pathlib import Path

import pynvml
import pytest

from agent.discovery.fake_nvml import FakeNVML
from agent.discovery.nvml import NVMLSource
from agent.discovery.nvmllib import NVML, NVMLLibrary
from agent.discovery.pci import PCIBus
from agent.discovery.settings import DiscoverySettings, open_discovery
from tests.support.nvml import NODE, NVMLEnv
from tests.support.sysfs_tree import SysfsTree


def test_discovers_every_gpu_with_identity_memory_and_placement(nvml_env: NVMLEnv, nvml: NVML) -> None:
    inventory = NVMLSource(nvml, PCIBus(nvml_env.sysfs_root)).discover()
    if nvml_env.profile is not None:  # the fixture node: exactly its 8 GPUs
        assert len(inventory.gpus) == 8
        assert inventory.gpus == nvml_env.profile.inventory(NODE).gpus
        assert inventory.gpu_driver_version == "535.161.08"
        assert [(g.minor, g.topology.node_id, g.topology.pcie_id) for g in inventory.gpus[::2]] == [
            (0, 0, "pci0000:17"),
            (2, 0, "pci0000:3a"),
            (4, 1, "pci0000:85"),
            (6, 1, "pci0000:ae"),
        ]
        return
    assert len(inventory.gpus) == nvml.count()  # this machine's real GPUs
    assert len({g.minor for g in inventory.gpus}) == len(inventory.gpus)
    for gpu in inventory.gpus:
        assert gpu.uuid.startswith("GPU-") and gpu.memory_bytes > 0 and gpu.model
        assert gpu.topology.pcie_id.startswith("pci") and gpu.topology.node_id >= 0
    assert inventory.gpu_driver_version


def test_without_sysfs_gpus_come_from_nvml_enumeration(nvml_env: NVMLEnv, nvml: NVML, tmp_path: Path) -> None:
    inventory = NVMLSource(nvml, PCIBus(tmp_path / "no-sysfs")).discover()
    assert len(inventory.gpus) == nvml.count()
    if nvml_env.profile is not None:
        expected = nvml_env.profile.inventory(NODE).gpus
        assert [(g.uuid, g.minor, g.bus_id) for g in inventory.gpus] == [(g.uuid, g.minor, g.bus_id) for g in expected]
        assert all(g.topology.pcie_id == "" and g.topology.socket_id == -1 for g in inventory.gpus)


def test_gpu_nvml_cannot_describe_is_skipped_with_a_warning(
    nvml_env: NVMLEnv, nvml: NVML, caplog: pytest.LogCaptureFixture
) -> None:
    fake = nvml_env.require_fake()
    fake.vanish(fake.gpus[3].uuid)
    inventory = NVMLSource(nvml, PCIBus(nvml_env.sysfs_root)).discover()
    assert [g.minor for g in inventory.gpus] == [0, 1, 2, 4, 5, 6, 7]
    assert "GPU bound to nvidia has no NVML handle" in caplog.text


def test_nvlink_peers_are_asked_once_and_cached(nvml_env: NVMLEnv, nvml: NVML) -> None:
    fake = nvml_env.require_fake()
    for gpu in fake.gpus[:4]:
        gpu.nvlink = True
    source = NVMLSource(nvml, PCIBus(nvml_env.sysfs_root))
    first = source.discover()
    assert [g.nvlink_peers for g in first.gpus[:5]] == [(1, 2, 3), (0, 2, 3), (0, 1, 3), (0, 1, 2), ()]
    for gpu in fake.gpus:
        gpu.nvlink = False  # NVML would say otherwise now; the cached answer stands
    assert source.discover() == first


def test_architecture_is_nvmls_name_of_it(nvml_env: NVMLEnv, nvml: NVML) -> None:
    fake = nvml_env.require_fake()
    fake.gpus[0].architecture = pynvml.NVML_DEVICE_ARCH_AMPERE
    fake.gpus[1].architecture = pynvml.NVML_DEVICE_ARCH_HOPPER
    fake.gpus[2].architecture = pynvml.NVML_DEVICE_ARCH_UNKNOWN
    gpus = NVMLSource(nvml, PCIBus(nvml_env.sysfs_root)).discover().gpus
    assert [g.architecture for g in gpus[:3]] == ["Ampere", "Hopper", ""]


def test_mig_mode_and_module_id_are_reported(nvml_env: NVMLEnv, nvml: NVML) -> None:
    fake = nvml_env.require_fake()
    fake.gpus[1].mig_enabled = True
    fake.gpus[1].module_id = 2
    gpus = NVMLSource(nvml, PCIBus(nvml_env.sysfs_root)).discover().gpus
    assert (gpus[1].mig_enabled, gpus[1].module_id) == (True, 2)
    assert (gpus[0].mig_enabled, gpus[0].module_id) == (False, None)


@pytest.fixture(params=["fake", "real"])
def failing_nvml(request: pytest.FixtureRequest) -> NVMLLibrary:
    """An NVML whose nvmlInit fails as without a driver: the fake told to, or the real one here."""
    if request.param == "fake":
        return FakeNVML(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        real: NVMLLibrary = pynvml
        return real
    pynvml.nvmlShutdown()
    pytest.skip("NVML initialises on this machine; the failure path runs on the fake")


def test_nvml_init_failure_is_one_log_line_and_no_gpus(
    failing_nvml: NVMLLibrary, sysfs: SysfsTree, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="agent"):
        stack = open_discovery(DiscoverySettings(node_name=NODE, sysfs_root=sysfs.root), nvml_library=failing_nvml)
        inventory = stack.discovery.run()
        stack.close()
    assert stack.nvml is None
    assert inventory.gpus == ()
    assert len(inventory.rdma) == 2  # the rest of discovery goes on
    lines = [r for r in caplog.records if r.name == "agent.discovery.settings"]
    assert [r.getMessage() for r in lines] == ["No NVIDIA driver: NVML unavailable, reporting no GPUs"]
    assert "NVML Shared Library Not Found" in getattr(lines[0], "error", "")


def test_other_nvml_init_failures_are_warnings(sysfs: SysfsTree, caplog: pytest.LogCaptureFixture) -> None:
    lib = FakeNVML(init_error=pynvml.NVML_ERROR_NO_PERMISSION)
    stack = open_discovery(DiscoverySettings(node_name=NODE, sysfs_root=sysfs.root), nvml_library=lib)
    assert stack.discovery.run().gpus == ()
    assert [r.levelno for r in caplog.records if r.name == "agent.discovery.settings"] == [logging.WARNING]


def test_non_display_functions_bound_to_nvidia_are_not_gpus(
    nvml_env: NVMLEnv, nvml: NVML, caplog: pytest.LogCaptureFixture
) -> None:
    nvml_env.require_fake()
    SysfsTree(nvml_env.sysfs_root).function(  # an NVSwitch
        "pci0000:17", "0000:1f:00.0", class_code=0x068000, vendor=0x10DE, device=0x1AF1, numa_node=0, driver="nvidia"
    )
    assert len(NVMLSource(nvml, PCIBus(nvml_env.sysfs_root)).discover().gpus) == 8
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
