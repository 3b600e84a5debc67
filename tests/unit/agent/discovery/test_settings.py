"""From flags to sources: real hardware, simulated profiles, and their NVML."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.discovery.fake_nvml import FakeNVML
from agent.discovery.settings import DiscoverySettings, open_discovery
from apis.errors import ConfigError
from tests.support.nvml import NODE
from tests.support.sysfs_tree import SysfsTree


def test_real_hardware_uses_pci_nvml_and_rdma_sources(sysfs: SysfsTree, fake_nvml: FakeNVML) -> None:
    stack = open_discovery(
        DiscoverySettings(node_name=NODE, sysfs_root=sysfs.root, netlink=False),
        nvml_library=fake_nvml,
    )
    try:
        assert [s.name for s in stack.discovery.sources] == ["pci", "nvml", "rdma"]
        inventory = stack.discovery.run()
        assert (len(inventory.gpus), len(inventory.rdma), inventory.simulated) == (8, 2, False)
        assert stack.nvml is not None and stack.nvml.count() == 8
        assert stack.fake is None  # real devices: nothing to inject faults into
    finally:
        stack.close()
        stack.close()  # idempotent


def test_simulation_replaces_nvml_and_rdma_and_brings_its_own_nvml(sysfs: SysfsTree) -> None:
    stack = open_discovery(DiscoverySettings(node_name=NODE, sysfs_root=sysfs.root, simulate="h100-8x"))
    try:
        assert [s.name for s in stack.discovery.sources] == ["pci", "simulated"]
        inventory = stack.discovery.run()
        assert (len(inventory.gpus), len(inventory.rdma), inventory.simulated) == (8, 8, True)
        assert len(inventory.pci) == 14  # PCI enumeration stays real
        assert stack.nvml is not None
        assert [stack.nvml.uuid(stack.nvml.handle_by_index(i)) for i in range(8)] == [g.uuid for g in inventory.gpus]
        assert stack.fake is not None and [g.uuid for g in stack.fake.gpus] == [g.uuid for g in inventory.gpus]
    finally:
        stack.close()


def test_nvml_can_be_turned_off(sysfs: SysfsTree) -> None:
    stack = open_discovery(DiscoverySettings(node_name=NODE, sysfs_root=sysfs.root, nvml=False, netlink=False))
    assert stack.nvml is None and stack.discovery.run().gpus == ()


def test_a_bad_profile_fails_at_start_up(sysfs: SysfsTree) -> None:
    with pytest.raises(ConfigError, match="not a built-in profile"):
        open_discovery(DiscoverySettings(node_name=NODE, sysfs_root=sysfs.root, simulate="/nonexistent.yaml"))


def test_a_node_with_hami_cores_library_reports_it_as_its_isolation_provider(
    sysfs: SysfsTree, fake_nvml: FakeNVML, tmp_path: Path
) -> None:
    library = tmp_path / "vgpu" / "libvgpu.so"
    settings = DiscoverySettings(node_name=NODE, sysfs_root=sysfs.root, netlink=False)
    stack = open_discovery(settings, nvml_library=fake_nvml, hami_core_library=library)
    try:
        assert [s.name for s in stack.discovery.sources] == ["pci", "nvml", "rdma", "hami-core"]
        assert stack.discovery.run().isolation_provider == ""
        library.parent.mkdir()
        library.write_bytes(b"stand-in")
        assert stack.discovery.run().isolation_provider == "HAMi-core"
        library.unlink()  # uninstalled: no longer reported
        assert stack.discovery.run().isolation_provider == ""
        library.mkdir()  # a directory is not the library
        assert stack.discovery.run().isolation_provider == ""
    finally:
        stack.close()


def test_a_simulated_node_takes_its_profiles_word_for_the_isolation_provider(sysfs: SysfsTree, tmp_path: Path) -> None:
    profile = tmp_path / "hami.yaml"
    profile.write_text(
        "isolationProvider: HAMi-core\n"
        "gpu: {name: Tesla T4, memory: 15Gi}\n"
        "numaNodes: [{pcieRoots: [{root: pci0000:00, gpus: ['0000:00:04.0']}]}]\n"
    )
    library = tmp_path / "absent.so"
    settings = DiscoverySettings(node_name=NODE, sysfs_root=sysfs.root, simulate=str(profile))
    stack = open_discovery(settings, hami_core_library=library)
    try:
        assert [s.name for s in stack.discovery.sources] == ["pci", "simulated"]
        assert stack.discovery.run().isolation_provider == "HAMi-core"
    finally:
        stack.close()
    plain = open_discovery(DiscoverySettings(node_name=NODE, sysfs_root=sysfs.root, simulate="t4-2x"))
    try:
        assert plain.discovery.run().isolation_provider == ""
    finally:
        plain.close()
