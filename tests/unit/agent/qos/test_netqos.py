"""Network QoS planning: HTB classes from the NodeSLO and pod → class filters (pure parts)."""

import pytest

from agent.qos import config
from agent.qos.config import QoSConfig
from agent.qos.netqos import HTBClass, NetworkQoS, htb_plan, pod_classes
from apis.errors import ConfigError
from tests.support.qos import ctr, make_pod

G = 1_000_000_000


def cfg(text: str) -> QoSConfig:
    return config.load(text)


def test_no_enabled_class_means_no_tree() -> None:
    assert htb_plan(QoSConfig(), G) is None


def test_classes_from_percent_and_absolute_rates() -> None:
    plan = htb_plan(
        cfg(
            "resourceQOSStrategy: {lsrClass: {networkQOS: {enable: true, egressRequest: 30%}},"
            " lsClass: {networkQOS: {enable: true, egressRequest: 20%, egressLimit: 80%}},"
            " beClass: {networkQOS: {enable: true, egressRequest: 10M, egressLimit: 100M}}}"
        ),
        G,
    )
    assert plan is not None
    assert plan.classes == (
        HTBClass("system", 0x10002, G - 300_000_000 - 200_000_000 - 10_000_000, G),
        HTBClass("lsr", 0x10003, 300_000_000, G),
        HTBClass("ls", 0x10004, 200_000_000, 800_000_000),
        HTBClass("be", 0x10005, 10_000_000, 100_000_000),
    )


def test_system_class_rates_when_enabled_and_minimum_rate() -> None:
    plan = htb_plan(
        cfg(
            "resourceQOSStrategy: {beClass: {networkQOS: {enable: true, egressLimit: 1M}},"
            " systemClass: {networkQOS: {enable: true, egressRequest: 5%}}}"
        ),
        G,
    )
    assert plan is not None
    system, be = plan.classes
    assert (system.rate_bps, system.ceil_bps) == (50_000_000, G)
    assert (be.rate_bps, be.ceil_bps) == (8000, 1_000_000)  # no request: a token guarantee


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{enable: true, egressRequest: 50M, egressLimit: 10M}", r"egressRequest \(50000000 bit/s\) above egressLimit"),
        ("{enable: true, egressLimit: 2G}", "above the link's 1000000000 bit/s"),
    ],
    ids=["request-above-limit", "above-link"],
)
def test_impossible_rates_name_the_class(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"resourceQOSStrategy\.beClass\.networkQOS: .*" + message):
        htb_plan(cfg(f"resourceQOSStrategy: {{beClass: {{networkQOS: {text}}}}}"), G)


def test_pod_classes_by_ip() -> None:
    plan = htb_plan(
        cfg("resourceQOSStrategy: {lsrClass: {networkQOS: {enable: true}}, beClass: {networkQOS: {enable: true}}}"),
        G,
    )
    assert plan is not None
    pods = [
        make_pod(ctr("a", limits={"cpu": "1", "memory": "1Gi"}), pod_ip="10.0.0.1"),  # LSR
        make_pod(ctr("a"), qos="LSE", pod_ip="10.0.0.2"),  # LSE follows LSR
        make_pod(ctr("a"), qos="BE", pod_ip="10.0.0.3"),
        make_pod(ctr("a", {"cpu": "1"}), pod_ip="10.0.0.4"),  # LS: not enabled → default class
        make_pod(ctr("a"), qos="BE", pod_ip="10.0.0.5", host_network=True),
        make_pod(ctr("a"), qos="BE", pod_ip="10.0.0.6", phase="Succeeded"),
        make_pod(ctr("a"), qos="BE", pod_ip="fd00::1"),  # IPv6: not matched by the u32 filter
        make_pod(ctr("a"), qos="BE", pod_ip="not-an-ip"),
        make_pod(ctr("a"), qos="BE"),  # no IP yet
    ]
    assert pod_classes(pods, plan) == {"10.0.0.1": 0x10003, "10.0.0.2": 0x10003, "10.0.0.3": 0x10005}


def test_total_bandwidth_must_be_known() -> None:
    net = NetworkQoS(
        ifname="eth0",
        netns="somewhere",
        config=cfg("resourceQOSStrategy: {beClass: {networkQOS: {enable: true}}}"),
        pods=list,
    )
    with pytest.raises(ConfigError, match="systemStrategy.totalNetworkBandwidth: not set"):
        net.setup()
