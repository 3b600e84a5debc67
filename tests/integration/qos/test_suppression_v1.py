"""BE suppression on real cgroups: a CPU hog in a BE pod is really throttled; real usage is sampled.

Waits are bounded polls (a few seconds at most) on kernel counters, never fixed sleeps compared
against timings, so a loaded machine slows the tests down but does not fail them.
"""

from __future__ import annotations

import os
import time

import pytest
from prometheus_client import CollectorRegistry

from agent.qos import knobs
from agent.qos.config import CPUSuppressConfig, QoSConfig
from agent.qos.scratch import ScratchTree
from agent.qos.suppress import BESuppressor
from agent.qos.usage import CgroupUsageSampler, UsageSample
from apis.extension.qos import KubeQoSClass
from tests.support.qos import ctr, make_pod
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.root]

HOG = "while True: pass"


class LSBusySampler:
    """Reports the node as taken by LS pods, so the rule leaves BE only its floor."""

    def sample(self) -> UsageSample:
        return UsageSample(capacity_milli=2000, node_used_milli=1900, pods_used_milli=1800, be_used_milli=0)


def test_suppression_really_throttles_a_be_hog(real_tree: ScratchTree) -> None:
    be = make_pod(ctr("a"), qos="BE")
    pod_cg = real_tree.add_pod(be)
    be_root = real_tree.kube.qos_dir(KubeQoSClass.BEST_EFFORT)
    real_tree.spawn(pod_cg, HOG)
    wait_for(lambda: pod_cg.cpu_usage_ns() > 50_000_000, what="the hog to run")
    assert be_root.throttling().nr_throttled == 0  # no limit yet

    registry = CollectorRegistry()
    config = QoSConfig(cpu_suppress=CPUSuppressConfig(enable=True, min_percent=5))  # floor: 5% of 2 cores
    suppressor = BESuppressor(cgroups=real_tree.kube, sampler=LSBusySampler(), config=config, registry=registry)
    decision = suppressor.step()
    assert decision.limit is not None and decision.limit.quota == 10_000
    assert be_root.read(knobs.CPU_MAX).quota == 10_000
    assert registry.get_sample_value("tessera_agent_be_suppress_cpu_cores") == pytest.approx(0.1)

    before, usage_before, started = be_root.throttling(), pod_cg.cpu_usage_ns(), time.monotonic()
    wait_for(lambda: be_root.throttling().nr_throttled >= before.nr_throttled + 5, what="five throttled periods")
    after = be_root.throttling()
    assert after.throttled_ns > before.throttled_ns
    elapsed_ns = (time.monotonic() - started) * 1e9
    # 0.1 core allowed; a free hog would use ~1 core. Loose: under half a core on average.
    assert pod_cg.cpu_usage_ns() - usage_before < 0.5 * elapsed_ns + 20_000_000


def test_sampler_sees_real_be_usage(real_tree: ScratchTree) -> None:
    be = make_pod(ctr("a"), qos="BE")
    pod_cg = real_tree.add_pod(be)
    real_tree.spawn(pod_cg, HOG)
    sampler = CgroupUsageSampler(real_tree.kube, lambda: [be])
    samples: list[UsageSample] = []

    def busy_be_seen() -> bool:
        s = sampler.sample()
        if s is not None:
            samples.append(s)
        return s is not None and s.be_used_milli > 100

    wait_for(busy_be_seen, what="the BE pod's usage sampled")
    last = samples[-1]
    assert last.pods_used_milli >= last.be_used_milli - 50  # kubepods includes BE (counter read skew allowed)
    assert last.node_used_milli > 0 and last.capacity_milli >= 1000


def test_loop_with_real_usage_suppresses_when_ls_is_busy(real_tree: ScratchTree) -> None:
    """End to end: a real LS hog makes the real sampler lower the BE quota below the threshold."""
    ls = make_pod(ctr("a", {"cpu": "1"}))
    be = make_pod(ctr("a"), qos="BE")
    ls_cg, be_cg = real_tree.add_pod(ls), real_tree.add_pod(be)
    real_tree.spawn(ls_cg, HOG)
    real_tree.spawn(be_cg, HOG)
    sampler = CgroupUsageSampler(real_tree.kube, lambda: [ls, be])
    # 65% of the node minus at least 300m the LS hog uses, in us per 100 ms period
    expected_quota = ((os.cpu_count() or 1) * 1000 * 65 // 100 - 300) * 100
    config = QoSConfig(cpu_suppress=CPUSuppressConfig(enable=True, threshold_percent=65))
    suppressor = BESuppressor(cgroups=real_tree.kube, sampler=sampler, config=config, registry=None)
    be_root = real_tree.kube.qos_dir(KubeQoSClass.BEST_EFFORT)

    def suppressed() -> bool:
        suppressor.step()
        limit = be_root.read(knobs.CPU_MAX)
        return not limit.unlimited and limit.quota <= expected_quota

    wait_for(suppressed, what="the suppression")
