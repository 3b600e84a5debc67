"""Network QoS on a real veth pair between two network namespaces.

Namespace A holds the "node" end (`qa`, the egress interface QoS shapes) with an LS pod IP and a
BE pod IP; namespace B the receiver. The HTB tree is checked with `tc` itself, and a bounded
transfer shows BE capped while LS is not (loose ratios: the machine may be loaded).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyroute2 import IPRoute, netns

from agent.qos import config
from agent.qos.netqos import NetworkQoS
from apis.k8s.core import Pod
from tests.support.qos import ctr, make_pod

pytestmark = [pytest.mark.integration, pytest.mark.root]

TRAFFIC = Path(__file__).with_name("traffic.py")
NODE, LS_IP, BE_IP, PEER = "10.77.0.1", "10.77.0.11", "10.77.0.12", "10.77.0.2"
CONFIG = config.load(
    """
resourceQOSStrategy:
  lsClass: {networkQOS: {enable: true, egressRequest: 60M, egressLimit: 100M}}
  beClass: {networkQOS: {enable: true, egressRequest: 1M, egressLimit: 10M}}
systemStrategy: {totalNetworkBandwidth: 100M}
"""
)
BE_CAP_BPS = 10_000_000
SECONDS = 2.0


@dataclass
class Link:
    ns_a: str
    ns_b: str
    ifname: str = "qa"

    def run(self, ns: str, *argv: str) -> str:
        return subprocess.run(["ip", "netns", "exec", ns, *argv], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def link() -> Iterator[Link]:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces")
    if shutil.which("ip") is None or shutil.which("tc") is None:
        pytest.skip("needs iproute2 (ip, tc)")
    tag = uuid.uuid4().hex[:8]
    link = Link(f"tessera-qa-{tag}", f"tessera-qb-{tag}")
    netns.create(link.ns_a)
    netns.create(link.ns_b)
    try:
        with IPRoute(netns=link.ns_a) as ipr:
            ipr.link("add", ifname="qa", kind="veth", peer={"ifname": "qb", "net_ns_fd": link.ns_b})
            index = ipr.link_lookup(ifname="qa")[0]
            for address in (NODE, LS_IP, BE_IP):
                ipr.addr("add", index=index, address=address, prefixlen=24)
            ipr.link("set", index=index, state="up")
            ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        with IPRoute(netns=link.ns_b) as ipr:
            index = ipr.link_lookup(ifname="qb")[0]
            ipr.addr("add", index=index, address=PEER, prefixlen=24)
            ipr.link("set", index=index, state="up")
            ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        yield link
    finally:
        netns.remove(link.ns_a)  # removing the namespace removes the veth pair with it
        netns.remove(link.ns_b)


def pods() -> list[Pod]:
    return [
        make_pod(ctr("a", {"cpu": "1"}), pod_ip=LS_IP),
        make_pod(ctr("a"), qos="BE", pod_ip=BE_IP),
        make_pod(ctr("a"), qos="BE", pod_ip=NODE, host_network=True),  # shares the node IP: not filtered
    ]


def classes(link: Link) -> dict[str, tuple[str, str]]:
    """classid → (rate, ceil) as `tc class show` prints them."""
    out = link.run(link.ns_a, "tc", "class", "show", "dev", link.ifname)
    return {
        m[0]: (m[2], m[3]) for m in re.findall(r"class htb (\S+) (?:parent (\S+)|root).*?rate (\S+) ceil (\S+)", out)
    }


def filters(link: Link) -> dict[str, str]:
    """source IP (hex) → flowid, from `tc -j filter show`."""
    out = json.loads(link.run(link.ns_a, "tc", "-j", "filter", "show", "dev", link.ifname) or "[]")
    return {f["options"]["match"]["value"]: f["options"]["flowid"] for f in out if "match" in f.get("options", {})}


def transfer(link: Link, *sources: str, port: int) -> dict[str, float]:
    """Bits per second each source got to the peer during one bounded window."""
    server = subprocess.Popen(
        ["ip", "netns", "exec", link.ns_b, sys.executable, str(TRAFFIC), "serve", str(port), str(SECONDS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        senders = [
            subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    link.ns_a,
                    sys.executable,
                    str(TRAFFIC),
                    "send",
                    src,
                    PEER,
                    str(port),
                    str(SECONDS + 3),
                ],
            )
            for src in sources
        ]
        out, _ = server.communicate(timeout=60)
        for sender in senders:
            sender.wait(timeout=30)
        return {k: float(v) for k, v in json.loads(out.strip().splitlines()[-1]).items()}
    finally:
        server.kill()
        server.wait()


def test_htb_tree_and_filters_exist_as_configured(link: Link) -> None:
    net = NetworkQoS(ifname=link.ifname, netns=link.ns_a, config=CONFIG, pods=pods)
    plan = net.setup()
    assert plan is not None
    assert net.sync() is True
    assert net.sync() is False  # nothing changed: no netlink traffic

    qdisc = json.loads(link.run(link.ns_a, "tc", "-j", "qdisc", "show", "dev", link.ifname))[0]
    assert (qdisc["kind"], qdisc["handle"], qdisc["options"]["default"]) == ("htb", "1:", "0x2")
    assert classes(link) == {
        "1:1": ("100Mbit", "100Mbit"),
        "1:2": ("39Mbit", "100Mbit"),  # system: what LS and BE do not reserve
        "1:4": ("60Mbit", "100Mbit"),  # LS
        "1:5": ("1Mbit", "10Mbit"),  # BE
    }
    assert filters(link) == {"a4d000b": "1:4", "a4d000c": "1:5"}  # 10.77.0.11, 10.77.0.12

    net.teardown()
    assert "htb" not in link.run(link.ns_a, "tc", "qdisc", "show", "dev", link.ifname)
    net.teardown()  # again: nothing there, no error


def test_filters_follow_pods(link: Link) -> None:
    current = pods()
    net = NetworkQoS(ifname=link.ifname, netns=link.ns_a, config=CONFIG, pods=lambda: current)
    net.setup()
    net.sync()
    current = current[:1]  # the BE pod went away
    assert net.sync() is True
    assert filters(link) == {"a4d000b": "1:4"}


def test_be_traffic_is_capped_and_ls_is_not(link: Link) -> None:
    net = NetworkQoS(ifname=link.ifname, netns=link.ns_a, config=CONFIG, pods=pods)
    net.setup()
    net.sync()
    rates = transfer(link, LS_IP, BE_IP, port=5201)
    ls_rate, be_rate = rates.get(LS_IP, 0.0), rates.get(BE_IP, 0.0)
    assert 0 < be_rate < 1.5 * BE_CAP_BPS, rates
    assert ls_rate > 3 * be_rate, rates
    alone = transfer(link, BE_IP, port=5202)  # an idle link: BE may borrow up to its ceil, no more
    assert 0 < alone.get(BE_IP, 0.0) < 1.5 * BE_CAP_BPS, alone

    net.teardown()
    unshaped = transfer(link, BE_IP, port=5203)
    assert unshaped.get(BE_IP, 0.0) > 2 * BE_CAP_BPS, unshaped  # the cap was QoS, not the link


def test_start_sets_up_syncs_and_rebuilds_on_a_new_config(link: Link) -> None:
    second = threading.Event()
    calls: list[int] = []
    be_only = config.load(
        "resourceQOSStrategy: {beClass: {networkQOS: {enable: true}}}\nsystemStrategy: {totalNetworkBandwidth: 100M}"
    )

    def source() -> list[Pod]:
        calls.append(1)
        if len(calls) == 1:
            net.set_config(be_only)  # takes effect at the next step
        if len(calls) >= 2:
            second.set()
        return pods()

    net = NetworkQoS(ifname=link.ifname, netns=link.ns_a, config=CONFIG, pods=source, interval_s=0.0)
    net.start()
    try:
        assert second.wait(10)
    finally:
        net.stop()
    assert set(classes(link)) == {"1:1", "1:2", "1:5"}  # rebuilt: LS no longer has a class
    assert filters(link) == {"a4d000c": "1:5"}
    assert net.installed() == {BE_IP: 0x10005}
