"""CPU usage rates from cumulative counters: node busy time and the kubepods cgroups (v2 fixture)."""

import shutil

from agent.qos.usage import CgroupUsageSampler, node_busy_ns
from apis.extension.qos import KubeQoSClass
from apis.k8s.core import Pod
from tests.support.qos import V2Tree, ctr, make_pod


class Counters:
    """A fake clock and node busy counter the test advances by hand."""

    def __init__(self) -> None:
        self.now = 100.0
        self.busy = 0

    def clock(self) -> float:
        return self.now

    def busy_ns(self) -> int:
        return self.busy


def set_usage(v2: V2Tree, rel: str, usec: int) -> None:
    v2.make(rel, cpu_stat=f"usage_usec {usec}\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n")


def test_rates_between_samples(v2: V2Tree) -> None:
    kube = v2.kube()
    be_pod = make_pod(ctr("a"), qos="BE")
    ls_pod = make_pod(ctr("a", {"cpu": "1"}))
    pods: list[Pod] = [be_pod, ls_pod]
    be_rel, ls_rel = v2.add_pod(kube, be_pod), v2.add_pod(kube, ls_pod)
    c = Counters()
    sampler = CgroupUsageSampler(kube, lambda: pods, capacity_milli=4000, busy_ns=c.busy_ns, clock=c.clock)
    assert sampler.sample() is None  # no interval yet

    c.now += 2.0
    c.busy += 5_000_000_000  # 2.5 cores busy over 2 s
    set_usage(v2, kube.kubepods().rel, 4_000_000)  # 2 cores in pods
    set_usage(v2, be_rel, 1_000_000)  # 0.5 core BE
    set_usage(v2, ls_rel, 3_000_000)
    s = sampler.sample()
    assert s is not None
    assert (s.capacity_milli, s.node_used_milli, s.pods_used_milli, s.be_used_milli) == (4000, 2500, 2000, 500)
    assert (s.system_used_milli, s.non_be_used_milli) == (500, 1500)


def test_new_and_vanished_be_pods(v2: V2Tree) -> None:
    kube = v2.kube()
    pods: list[Pod] = []
    c = Counters()
    sampler = CgroupUsageSampler(kube, lambda: pods, capacity_milli=2000, busy_ns=c.busy_ns, clock=c.clock)
    sampler.sample()
    late = make_pod(ctr("a"), qos="BE")
    pods.append(late)
    rel = v2.add_pod(kube, late)
    set_usage(v2, rel, 900_000)
    c.now += 1.0
    s = sampler.sample()
    assert s is not None and s.be_used_milli == 0  # first reading of a new pod gives no rate

    shutil.rmtree(v2.root / rel)  # the pod is gone
    c.now += 1.0
    s = sampler.sample()
    assert s is not None and s.be_used_milli == 0


def test_without_a_pod_source_the_besteffort_cgroup_is_be(v2: V2Tree) -> None:
    kube = v2.kube()
    c = Counters()
    sampler = CgroupUsageSampler(kube, capacity_milli=2000, busy_ns=c.busy_ns, clock=c.clock)
    sampler.sample()
    set_usage(v2, kube.qos_dir(KubeQoSClass.BEST_EFFORT).rel, 250_000)
    c.now += 0.5
    s = sampler.sample()
    assert s is not None and s.be_used_milli == 500


def test_node_busy_time_is_real_and_grows() -> None:
    first = node_busy_ns()
    assert first > 0
    assert node_busy_ns() >= first
