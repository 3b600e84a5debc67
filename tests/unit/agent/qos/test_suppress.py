"""BE CPU suppression: the pure rule, and the loop over a v2 fixture with a fake sampler."""

import threading

import pytest
from prometheus_client import CollectorRegistry

from agent.qos import config
from agent.qos.config import CPUSuppressConfig, QoSConfig
from agent.qos.knobs import CPUMax
from agent.qos.suppress import BESuppressor, decide
from agent.qos.usage import UsageSample
from apis.extension.qos import KubeQoSClass
from tests.support.qos import V2Tree

ON = CPUSuppressConfig(enable=True)
UNLIMITED = CPUMax(-1)


def sample(node: int, pods: int, be: int, capacity: int = 8000) -> UsageSample:
    return UsageSample(capacity_milli=capacity, node_used_milli=node, pods_used_milli=pods, be_used_milli=be)


def test_formula_is_capacity_times_threshold_minus_ls_minus_system() -> None:
    # 8 cores × 65% = 5200m; non-BE pods 2000m; system 500m → BE may use 2700m
    d = decide(sample(node=4000, pods=3500, be=1500), UNLIMITED, ON)
    assert d.allowance_milli == 2700
    assert d.limit == CPUMax(270_000)


def test_floor_is_koordinators_minimum_quota_or_min_percent() -> None:
    busy = sample(node=8000, pods=7500, be=0)
    assert decide(busy, UNLIMITED, ON).limit == CPUMax(2000)
    floored = CPUSuppressConfig(enable=True, min_percent=10)
    assert decide(busy, UNLIMITED, floored).limit == CPUMax(80_000)


@pytest.mark.parametrize(
    ("current", "expected", "reason"),
    [
        (CPUMax(270_000), None, "unchanged"),
        (CPUMax(265_000), None, "change below 1% of the node"),  # 8 cores: 1% = 8000us
        (CPUMax(100_000), CPUMax(180_000), "increase, limited per step"),  # +10% of 8 cores = 80000us
        (CPUMax(600_000), CPUMax(270_000), "suppress"),  # decreases apply at once
        (CPUMax(135_000, 50_000), None, "unchanged"),  # same rate in another period
    ],
    ids=["unchanged", "small-delta", "slow-increase", "fast-decrease", "other-period"],
)
def test_damping(current: CPUMax, expected: CPUMax | None, reason: str) -> None:
    d = decide(sample(node=4000, pods=3500, be=1500), current, ON)
    assert (d.limit, d.reason) == (expected, reason)


def test_small_change_down_to_the_floor_still_applies() -> None:
    d = decide(sample(node=8000, pods=7500, be=0), CPUMax(3000), ON)
    assert d.limit == CPUMax(2000)


class FakeSampler:
    def __init__(self, *samples: UsageSample | None) -> None:
        self.samples = list(samples)

    def sample(self) -> UsageSample | None:
        return self.samples.pop(0) if self.samples else None


def suppressor(v2: V2Tree, sampler: FakeSampler, cfg: QoSConfig) -> tuple[BESuppressor, CollectorRegistry, str]:
    kube = v2.kube()
    registry = CollectorRegistry()
    s = BESuppressor(cgroups=kube, sampler=sampler, config=cfg, registry=registry)
    return s, registry, kube.qos_dir(KubeQoSClass.BEST_EFFORT).rel


ENABLED = QoSConfig(cpu_suppress=ON)


def test_step_writes_the_quota_and_exports_the_gauge(v2: V2Tree) -> None:
    s, registry, be = suppressor(v2, FakeSampler(None, sample(4000, 3500, 1500), sample(4000, 3500, 1500)), ENABLED)
    assert s.step().reason == "no sample yet"
    assert v2.read(be, "cpu.max") == "max 100000"
    assert s.step().limit == CPUMax(270_000)
    assert v2.read(be, "cpu.max") == "270000 100000"
    assert registry.get_sample_value("tessera_agent_be_suppress_cpu_cores") == pytest.approx(2.7)
    assert s.step().limit is None  # steady: nothing written
    assert registry.get_sample_value("tessera_agent_be_suppress_cpu_cores") == pytest.approx(2.7)


def test_ls_load_rise_cuts_at_once_and_recovery_is_stepwise(v2: V2Tree) -> None:
    quiet, busy = sample(1000, 800, 400), sample(7000, 6500, 200)
    s, _, _ = suppressor(v2, FakeSampler(quiet, busy, quiet, quiet), ENABLED)
    first = s.step().limit
    assert first is not None and first.quota == 460_000  # 5200 - 400 - 200
    assert s.step().limit == CPUMax(2000)  # LS took the node: floor at once
    assert s.step().limit == CPUMax(82_000)  # back up by at most 10% of 8 cores per step
    assert s.step().limit == CPUMax(162_000)


def test_disabled_lifts_the_limit_once(v2: V2Tree) -> None:
    s, registry, be = suppressor(v2, FakeSampler(sample(1000, 500, 0), sample(1000, 500, 0)), QoSConfig())
    v2.make(be, cpu_max="50000 100000")
    assert s.step().reason == "disabled"
    assert v2.read(be, "cpu.max") == "max 100000"
    assert registry.get_sample_value("tessera_agent_be_suppress_cpu_cores") == 8.0
    v2.make(be, cpu_max="50000 100000")  # someone else writes it: not fought every second
    s.step()
    assert v2.read(be, "cpu.max") == "50000 100000"
    s.set_config(QoSConfig())  # a new config recovers again
    s.step()
    assert v2.read(be, "cpu.max") == "max 100000"


def test_missing_or_broken_be_cgroup_is_survived(v2: V2Tree) -> None:
    s, _, be = suppressor(v2, FakeSampler(sample(1000, 500, 0), sample(1000, 500, 0)), ENABLED)
    (v2.root / be / "cpu.max").write_text("nonsense\n")
    assert s.step().reason.startswith("error: ")
    for child in (v2.root / be).iterdir():
        child.unlink()
    (v2.root / be).rmdir()
    assert s.step().reason == "no BestEffort cgroup"


def test_cpuset_policy_applies_cfs_quota(v2: V2Tree) -> None:
    cfg = config.load("resourceUsedThresholdWithBE: {enable: true, cpuSuppressPolicy: cpuset}")
    s, _, be = suppressor(v2, FakeSampler(sample(4000, 3500, 1500)), cfg)
    s.step()
    assert v2.read(be, "cpu.max") == "270000 100000"


def test_start_steps_in_a_thread_until_stop(v2: V2Tree) -> None:
    fourth = threading.Event()

    class CountingSampler(FakeSampler):
        calls = 0

        def sample(self) -> UsageSample | None:
            self.calls += 1
            if self.calls >= 4:
                fourth.set()
            return sample(4000, 3500, 1500)

    kube = v2.kube()
    s = BESuppressor(cgroups=kube, sampler=CountingSampler(), config=ENABLED, registry=None, period_s=0.0)
    s.start()
    try:
        assert fourth.wait(10)
    finally:
        s.stop()
    assert v2.read(kube.qos_dir(KubeQoSClass.BEST_EFFORT).rel, "cpu.max") == "270000 100000"
