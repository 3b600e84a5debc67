"""The QoS policy: pod + NodeSLO → cgroup settings for the pod and each container."""

import pytest

from agent.qos import config
from agent.qos.config import ResourceQoSConfig
from agent.qos.knobs import CPUMax
from agent.qos.policy import CgroupSettings, plan
from apis.extension.qos import KubeQoSClass, QoSClass
from tests.support.qos import batch_ctr, ctr, make_pod

GiB = 2**30
MiB = 2**20
DEFAULT = ResourceQoSConfig()
NEUTRAL_MEMORY = {"memory_min": 0, "memory_low": 0, "memory_high": -1}


def test_burstable_pod_is_ls_with_kubelets_values() -> None:
    pod = make_pod(ctr("a", {"cpu": "500m", "memory": "1Gi"}, {"cpu": "2", "memory": "2Gi"}))
    p = plan(pod, DEFAULT)
    assert (p.qos, p.kube_qos) == (QoSClass.LS, KubeQoSClass.BURSTABLE)
    assert p.containers["a"] == CgroupSettings(
        cpu_shares=512, cpu_max=CPUMax(200_000), memory_max=2 * GiB, **NEUTRAL_MEMORY
    )
    assert p.pod == CgroupSettings(
        cpu_shares=512, cpu_max=CPUMax(200_000), cpu_idle=False, memory_max=2 * GiB, **NEUTRAL_MEMORY
    )
    assert p.problems == ()


def test_guaranteed_pod_is_lsr() -> None:
    pod = make_pod(ctr("a", limits={"cpu": "1", "memory": "1Gi"}))
    p = plan(pod, DEFAULT)
    assert (p.qos, p.kube_qos) == (QoSClass.LSR, KubeQoSClass.GUARANTEED)
    assert p.pod.cpu_shares == 1024 and p.pod.cpu_max == CPUMax(100_000)


def test_be_pod_uses_batch_resources() -> None:
    pod = make_pod(
        batch_ctr("a", cpu_request="1000", cpu_limit="2000", memory_request="512Mi", memory_limit="1Gi"),
        batch_ctr("b", cpu_request="500", cpu_limit="500", memory_limit="256Mi"),
        qos="BE",
    )
    p = plan(pod, DEFAULT)
    assert (p.qos, p.kube_qos) == (QoSClass.BE, KubeQoSClass.BEST_EFFORT)
    assert p.containers["a"].cpu_shares == 1024
    assert p.containers["a"].cpu_max == CPUMax(200_000)
    assert p.containers["a"].memory_max == GiB
    assert p.pod.cpu_shares == 1536
    assert p.pod.cpu_max == CPUMax(250_000)
    assert p.pod.memory_max == GiB + 256 * MiB


def test_be_pod_without_requests_gets_the_minimum_weight_and_no_limits() -> None:
    p = plan(make_pod(ctr("a")), DEFAULT)
    assert p.qos is QoSClass.BE
    assert p.containers["a"].cpu_shares == 2
    assert p.containers["a"].cpu_max == CPUMax(-1)
    assert p.containers["a"].memory_max == -1


def test_pod_limit_needs_every_container_limited() -> None:
    pod = make_pod(ctr("a", {"cpu": "1"}, {"cpu": "1"}), ctr("b", {"cpu": "1"}))
    p = plan(pod, DEFAULT)
    assert p.containers["a"].cpu_max == CPUMax(100_000)
    assert p.pod.cpu_max == CPUMax(-1)
    assert p.pod.cpu_shares == 2048


def test_pod_level_counts_init_containers_and_overhead() -> None:
    pod = make_pod(
        ctr("a", {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}),
        init=[ctr("setup", {"cpu": "3"}, {"cpu": "3", "memory": "2Gi"})],
        overhead={"cpu": "100m", "memory": "64Mi"},
    )
    p = plan(pod, DEFAULT)
    assert p.pod.cpu_shares == 3174  # max(1, 3) cores + 100m overhead = 3100m
    assert p.pod.cpu_max == CPUMax(310_000)
    assert p.pod.memory_max == 2 * GiB + 64 * MiB
    assert set(p.containers) == {"a"}  # init containers are not planned


def test_memory_qos_percentages() -> None:
    memory_qos = "{enable: true, minLimitPercent: 100, lowLimitPercent: 50, throttlingPercent: 80}"
    cfg = config.load(f"resourceQOSStrategy: {{lsClass: {{memoryQOS: {memory_qos}}}}}").resource_qos
    p = plan(make_pod(ctr("a", {"memory": "1Gi"}, {"memory": "2Gi"})), cfg)
    c = p.containers["a"]
    assert (c.memory_min, c.memory_low, c.memory_high) == (GiB, GiB // 2, int(2 * GiB * 0.8))
    unlimited = plan(make_pod(ctr("a", {"memory": "1Gi"})), cfg).containers["a"]
    assert (unlimited.memory_min, unlimited.memory_high) == (GiB, -1)  # no limit: no throttling


def test_memory_high_never_below_the_protection() -> None:
    cfg = config.load(
        "resourceQOSStrategy: {lsClass: {memoryQOS: {enable: true, minLimitPercent: 100, throttlingPercent: 10}}}"
    ).resource_qos
    c = plan(make_pod(ctr("a", {"memory": "1Gi"}, {"memory": "2Gi"})), cfg).containers["a"]
    assert c.memory_high == GiB


def test_sched_idle_only_when_cpu_qos_is_enabled() -> None:
    be_pod = make_pod(ctr("a"), qos="BE")
    assert plan(be_pod, DEFAULT).pod.cpu_idle is False
    enabled = config.load("resourceQOSStrategy: {beClass: {cpuQOS: {enable: true}}}").resource_qos
    p = plan(be_pod, enabled)
    assert p.pod.cpu_idle is True
    assert p.containers["a"].cpu_idle is None
    assert plan(make_pod(ctr("a", {"cpu": "1"})), enabled).pod.cpu_idle is False


@pytest.mark.parametrize("label", ["be", "Best", ""], ids=["lowercase", "unknown", "empty"])
def test_invalid_qos_label_falls_back_and_is_reported(label: str) -> None:
    p = plan(make_pod(ctr("a", {"cpu": "1"}), qos=label), DEFAULT)
    assert p.qos is QoSClass.LS
    assert len(p.problems) == 1 and f"koordinator.sh/qosClass={label!r}" in p.problems[0]


def test_label_overrides_kube_class() -> None:
    p = plan(make_pod(ctr("a", {"cpu": "500m"}, {"cpu": "1", "memory": "1Gi"}), qos="BE"), DEFAULT)
    assert p.qos is QoSClass.BE and p.kube_qos is KubeQoSClass.BURSTABLE
    assert p.containers["a"].cpu_shares == 512  # no batch resources: cpu/memory are used
