"""Writing settings in an order the kernel accepts (the v1-only rules are covered on real cgroups
in tests/integration/qos; here the v2 fixture and the ordering logic)."""

from agent.qos import enforce
from agent.qos.cgroups import Hierarchy
from agent.qos.knobs import CPUMax
from agent.qos.policy import CgroupSettings
from tests.support.qos import V2Tree


def test_apply_writes_every_given_knob_once(v2: V2Tree) -> None:
    v2.make("p")
    cg = v2.hierarchy.cgroup("p")
    settings = CgroupSettings(
        cpu_shares=512, cpu_max=CPUMax(50_000), cpu_idle=False, memory_max=1 << 30, memory_min=1 << 20, memory_high=-1
    )
    applied = enforce.Enforcer().apply(cg, settings)
    assert {c.knob for c in applied.changes} == {"cpu.shares", "cpu.max", "memory.max", "memory.min"}
    assert v2.read("p", "cpu.max") == "50000 100000"
    assert v2.read("p", "memory.min") == "1048576"
    assert enforce.Enforcer().apply(cg, settings).changes == []


def test_idle_wins_over_shares(v2: V2Tree) -> None:
    v2.make("p")
    cg = v2.hierarchy.cgroup("p")
    applied = enforce.Enforcer().apply(cg, CgroupSettings(cpu_shares=2, cpu_idle=True))
    assert [c.knob for c in applied.changes] == ["cpu.idle"]  # shares are meaningless (and refused) when idle
    applied = enforce.Enforcer().apply(cg, CgroupSettings(cpu_shares=2, cpu_idle=False))
    assert [c.knob for c in applied.changes] == ["cpu.idle", "cpu.shares"]  # idle cleared first


def test_missing_kernel_files_are_reported_not_fatal(v2: V2Tree) -> None:
    v2.make("p")
    for name in ("memory.min", "memory.low", "memory.high", "cpu.idle"):
        (v2.root / "p" / name).unlink()
    applied = enforce.Enforcer().apply(
        v2.hierarchy.cgroup("p"),
        CgroupSettings(cpu_shares=100, cpu_idle=True, memory_max=1 << 30, memory_min=1, memory_low=0, memory_high=-1),
    )
    assert sorted(applied.unsupported) == ["cpu.idle", "memory.high", "memory.low", "memory.min"]
    assert {c.knob for c in applied.changes} == {"cpu.shares", "memory.max"}


def test_apply_tree_lowers_children_before_parents(v2: V2Tree) -> None:
    v2.make("pod", cpu_max="400000 100000")
    v2.make("pod/c", cpu_max="400000 100000")
    pod, c = v2.hierarchy.cgroup("pod"), v2.hierarchy.cgroup("pod/c")
    applied = enforce.Enforcer().apply_tree(
        [(pod, CgroupSettings(cpu_max=CPUMax(200_000))), (c, CgroupSettings(cpu_max=CPUMax(100_000)))]
    )
    assert [c.cgroup for c in applied.changes] == ["/pod/c", "/pod"]
    assert v2.read("pod", "cpu.max") == "200000 100000" and v2.read("pod/c", "cpu.max") == "100000 100000"


def test_v2_never_caps_children_at_parents(v2: V2Tree) -> None:
    v2.make("be", cpu_max="10000 100000")
    v2.make("be/pod")
    assert enforce.Enforcer().effective_limit(v2.hierarchy.cgroup("be/pod"), CPUMax(200_000)) == CPUMax(200_000)
    changes = enforce.Enforcer().limit_subtree(v2.hierarchy.cgroup("be"), CPUMax(5000))
    assert [c.cgroup for c in changes] == ["/be"]


def test_root_has_no_ancestor_to_cap_at() -> None:
    root = Hierarchy.v1({"cpu": "/nonexistent/cpu", "memory": "/nonexistent/memory"}).cgroup("")
    assert enforce.Enforcer().effective_limit(root, CPUMax(1000)) == CPUMax(1000)
