"""The cgroup library on a cgroup-v2 fixture tree, and hierarchy detection from mount tables."""

import os
from pathlib import Path

import pytest

from agent.qos import convert, knobs
from agent.qos.cgroups import CgroupError, CgroupNotFound, CgroupUnsupported, Hierarchy
from agent.qos.knobs import CgroupVersion, CPUMax
from tests.support.qos import V2Tree

HYBRID = """\
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
LEGACY_COMBINED = """\
cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,nodev,noexec,relatime,cpu,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0
"""
UNIFIED = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"


def test_hybrid_mounts_use_v1() -> None:
    h = Hierarchy.detect(HYBRID)
    assert h.version is CgroupVersion.V1
    assert h.mounts["cpu"] == Path("/sys/fs/cgroup/cpu")
    assert h.path("memory", "kubepods") == Path("/sys/fs/cgroup/memory/kubepods")


def test_combined_cpu_cpuacct_mount_serves_both() -> None:
    h = Hierarchy.detect(LEGACY_COMBINED)
    assert h.mounts["cpu"] == h.mounts["cpuacct"] == Path("/sys/fs/cgroup/cpu,cpuacct")


def test_unified_only_is_v2() -> None:
    h = Hierarchy.detect(UNIFIED)
    assert h.version is CgroupVersion.V2
    assert h.path("cpu", "kubepods.slice") == Path("/sys/fs/cgroup/kubepods.slice")


def test_escaped_mount_points_are_decoded() -> None:
    h = Hierarchy.detect("cgroup2 /host\\040root/cgroup cgroup2 rw 0 0\n")
    assert h.mounts[""] == Path("/host root/cgroup")


def test_no_hierarchy_names_the_source() -> None:
    with pytest.raises(CgroupError, match="/proc/self/mounts.*no cgroup"):
        Hierarchy.detect("proc /proc proc rw 0 0\n")


def test_this_machine_is_detected() -> None:
    h = Hierarchy.detect()  # real /proc/self/mounts: whichever it is, it must parse
    assert h.version in (CgroupVersion.V1, CgroupVersion.V2)


def test_reads_logical_values_from_v2_files(v2: V2Tree) -> None:
    v2.make("a", cpu_weight="39", cpu_max="50000 100000", memory_max="max", cpuset_cpus="0-1,3")
    cg = v2.hierarchy.cgroup("a")
    assert cg.read(knobs.CPU_SHARES) == convert.weight_to_shares(39)
    assert cg.read(knobs.CPU_MAX) == CPUMax(50_000)
    assert cg.read(knobs.MEMORY_MAX) == -1
    assert cg.read(knobs.CPUSET_CPUS) == "0-1,3"
    assert cg.read(knobs.CPU_IDLE) is False


def test_writes_v2_file_formats_and_is_idempotent(v2: V2Tree) -> None:
    v2.make("a")
    cg = v2.hierarchy.cgroup("a")
    change = cg.write(knobs.CPU_SHARES, 1024)
    assert change is not None and (change.knob, change.old, change.new) == ("cpu.shares", "100", "39")
    assert v2.read("a", "cpu.weight") == "39"
    assert cg.write(knobs.CPU_MAX, CPUMax(150_000)) is not None
    assert v2.read("a", "cpu.max") == "150000 100000"
    assert cg.write(knobs.MEMORY_MAX, 1_000_001) is not None
    assert v2.read("a", "memory.max") == "999424"  # whole pages, as the kernel keeps it
    assert cg.write(knobs.MEMORY_HIGH, -1) is None  # already "max"

    before = {p.name: p.stat().st_mtime_ns for p in (v2.root / "a").iterdir()}
    os.utime(v2.root / "a" / "cpu.weight", ns=(1, 1))
    assert cg.write(knobs.CPU_SHARES, 1024) is None
    assert cg.write(knobs.CPU_SHARES, 1000) is None  # maps to the same weight (39): nothing to do
    assert cg.write(knobs.MEMORY_MAX, 1_000_001) is None
    assert (v2.root / "a" / "cpu.weight").stat().st_mtime_ns == 1  # not rewritten
    assert before.keys() == {p.name for p in (v2.root / "a").iterdir()}


def test_invalid_value_names_file_and_value(v2: V2Tree) -> None:
    v2.make("a")
    cg = v2.hierarchy.cgroup("a")
    with pytest.raises(CgroupError, match=r"a/cpu\.weight: value '300000': must be in 2\.\.262144"):
        cg.write(knobs.CPU_SHARES, 300_000)
    with pytest.raises(CgroupError, match=r"cpu\.max: value .*quota must be"):
        cg.write(knobs.CPU_MAX, CPUMax(10))
    with pytest.raises(CgroupError, match="cpuset.cpus: value '0-a'"):
        cg.write(knobs.CPUSET_CPUS, "0-a")
    assert v2.read("a", "cpu.weight") == "100"


def test_vanished_and_unsupported_are_told_apart(v2: V2Tree) -> None:
    v2.make("a")
    (v2.root / "a" / "memory.min").unlink()
    cg = v2.hierarchy.cgroup("a")
    assert not cg.supports(knobs.MEMORY_MIN)
    assert cg.supports(knobs.MEMORY_MAX)
    with pytest.raises(CgroupUnsupported, match="memory.min"):
        cg.write(knobs.MEMORY_MIN, 4096)
    with pytest.raises(CgroupNotFound, match="gone/cpu.max: cgroup does not exist"):
        v2.hierarchy.cgroup("gone").read(knobs.CPU_MAX)
    assert not v2.hierarchy.cgroup("gone").supports(knobs.CPU_MAX)


def test_garbage_content_is_a_clear_error(v2: V2Tree) -> None:
    v2.make("a", cpu_max="lots\n")
    with pytest.raises(CgroupError, match=r"cpu\.max: value 'lots\\n': unexpected content"):
        v2.hierarchy.cgroup("a").read(knobs.CPU_MAX)


def test_statistics_from_cpu_stat(v2: V2Tree) -> None:
    v2.make("a", cpu_stat="usage_usec 1500\nnr_periods 10\nnr_throttled 4\nthrottled_usec 250\n")
    cg = v2.hierarchy.cgroup("a")
    assert cg.cpu_usage_ns() == 1_500_000
    t = cg.throttling()
    assert (t.nr_periods, t.nr_throttled, t.throttled_ns) == (10, 4, 250_000)


def test_tree_navigation(v2: V2Tree) -> None:
    v2.make("k/b/p1")
    v2.make("k/b/p2")
    k = v2.hierarchy.cgroup("/k/")
    assert str(k) == "/k" and k.child("b").name == "b"
    assert [c.rel for c in k.child("b").children()] == ["k/b/p1", "k/b/p2"]
    assert [c.rel for c in k.walk_bottom_up()] == ["k/b/p1", "k/b/p2", "k/b", "k"]
    assert k.parent() is not None and k.parent().rel == ""  # type: ignore[union-attr]
    assert v2.hierarchy.cgroup("").parent() is None
    assert v2.hierarchy.cgroup("nope").children() == []
