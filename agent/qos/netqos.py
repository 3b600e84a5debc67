"""Network QoS: an HTB tree on the node's egress interface that guarantees LS a rate and caps BE.

Koordinator's `networkQOS` per class (`egressRequest` = guaranteed rate, `egressLimit` = cap, as
a percent of `systemStrategy.totalNetworkBandwidth` or an absolute rate in bits/s), applied with
tc through pyroute2:

    root qdisc 1: htb (default 1:2)
    └── 1:1   rate = ceil = total
        ├── 1:2  system / unclassified traffic (host, pods of classes without network QoS)
        ├── 1:3  LSR (and LSE)      ├── 1:4  LS      └── 1:5  BE
    filters on 1: — u32 `match ip src <pod IP>/32` → the pod's class

Only classes whose networkQOS is enabled get an HTB class and filters; the system class gets
systemClass's rates when enabled, else what the others do not reserve. Pods are matched by pod
IP (IPv4; host-network pods share the node's IP and are left in the default class) — net_cls
classids are not used because cgroup v2 has no net_cls and v1 nodes often do not mount it.
Ingress shaping (needs an IFB device) is not implemented.

`setup()` (re)creates the tree, `sync()` makes the filters match the current pods (only when the
set changed), `teardown()` removes everything (the root qdisc) and is safe to repeat. `start()`
runs setup and then syncs every interval in a thread (`stop()` ends it, leaving the tree). Wiring (the agent process):

    net = NetworkQoS(ifname="eth0", config=qos_config, pods=informer_pods)
    net.start()      # a daemon thread (agent.periodic); net.stop() at shutdown
    ...; net.teardown()   # only when network QoS is switched off for good
"""

from __future__ import annotations

import errno
import ipaddress
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from agent.periodic import Periodic
from agent.qos.config import ClassQoS, QoSConfig
from agent.qos.pods import PodSource
from apis.errors import ConfigError, TesseraError
from apis.extension.qos import QoSClass, qos_class
from apis.k8s.core import Pod
from kube.logs import V

__all__ = ["HTBClass", "HTBPlan", "NetworkQoS", "NetworkQoSError", "htb_plan", "pod_classes"]

log = logging.getLogger(__name__)

ROOT_HANDLE: Final = 0x10000  # 1:
ROOT_CLASS: Final = 0x10001  # 1:1
SYSTEM_CLASS: Final = 0x10002  # 1:2, also the default for unmatched traffic
CLASS_IDS: Final = {"lsr": 0x10003, "ls": 0x10004, "be": 0x10005}
FILTER_PRIO: Final = 10
ETH_P_IP: Final = 0x0800
#: the smallest guaranteed rate given to a class without `egressRequest` (1 KB/s).
MIN_RATE_BPS: Final = 8000


class NetworkQoSError(TesseraError):
    """A tc/netlink operation failed; names the interface and the operation."""


@dataclass(frozen=True, slots=True)
class HTBClass:
    name: str
    classid: int
    rate_bps: int
    ceil_bps: int


@dataclass(frozen=True, slots=True)
class HTBPlan:
    """The HTB tree to build: the root rate and the leaf classes (system first)."""

    total_bps: int
    classes: tuple[HTBClass, ...]

    def classid_of(self, name: str) -> int | None:
        return next((c.classid for c in self.classes if c.name == name), None)


def htb_plan(config: QoSConfig, total_bps: int) -> HTBPlan | None:
    """The HTB classes for `config` on a link of `total_bps`; None when no class enables network QoS.

    Raises ConfigError naming the field when a class asks for more than it may have.
    """
    strategy = config.resource_qos
    leaves: list[HTBClass] = []
    for name, cls in (("lsr", strategy.lsr), ("ls", strategy.ls), ("be", strategy.be)):
        if cls.network.enable:
            leaves.append(_leaf(name, CLASS_IDS[name], cls, total_bps))
    if not leaves:
        return None
    reserved = sum(c.rate_bps for c in leaves)
    if strategy.system.network.enable:
        system = _leaf("system", SYSTEM_CLASS, strategy.system, total_bps)
    else:
        system = HTBClass("system", SYSTEM_CLASS, max(MIN_RATE_BPS, total_bps - reserved), total_bps)
    if reserved + system.rate_bps > total_bps:
        log.warning(
            "Network QoS guarantees exceed the link; HTB shares by ratio",
            extra={"reserved_bps": reserved + system.rate_bps, "total_bps": total_bps},
        )
    return HTBPlan(total_bps, (system, *leaves))


def _leaf(name: str, classid: int, cls: ClassQoS, total_bps: int) -> HTBClass:
    net = cls.network
    rate = net.egress_request.resolve(total_bps) if net.egress_request else MIN_RATE_BPS
    ceil = net.egress_limit.resolve(total_bps) if net.egress_limit else total_bps
    field = f"resourceQOSStrategy.{name}Class.networkQOS"
    if rate > total_bps or ceil > total_bps:
        raise ConfigError(f"{field}: egress rate/limit ({rate}/{ceil} bit/s) above the link's {total_bps} bit/s")
    if rate > ceil:
        raise ConfigError(f"{field}: egressRequest ({rate} bit/s) above egressLimit ({ceil} bit/s)")
    return HTBClass(name, classid, max(MIN_RATE_BPS, rate), max(MIN_RATE_BPS, ceil))


def pod_classes(pods: Iterable[Pod], plan: HTBPlan) -> dict[str, int]:
    """Pod IPv4 address → HTB classid, for running pods whose class has its own HTB class."""
    out: dict[str, int] = {}
    for pod in pods:
        if pod.is_terminal or pod.host_network or not pod.pod_ip:
            continue
        try:
            address = ipaddress.ip_address(pod.pod_ip)
        except ValueError:
            log.warning("Pod has a malformed IP; network QoS skips it", extra={"pod": pod.key, "ip": pod.pod_ip})
            continue
        if address.version != 4:
            continue  # u32 src matching here is IPv4 only
        classid = plan.classid_of(_class_name(qos_class(pod)))
        if classid is not None:
            out[str(address)] = classid
    return out


def _class_name(qos: QoSClass) -> str:
    if qos in (QoSClass.LSE, QoSClass.LSR):
        return "lsr"
    return {QoSClass.LS: "ls", QoSClass.BE: "be"}.get(qos, "system")


class NetworkQoS:
    """The HTB tree on one interface (optionally inside a named network namespace).

    Not thread-safe: either `start()`/`stop()`, or direct calls from one thread; `set_config` from any.
    """

    def __init__(
        self,
        *,
        ifname: str,
        config: QoSConfig,
        pods: PodSource,
        netns: str | None = None,
        interval_s: float = 10.0,
    ) -> None:
        self._ifname = ifname
        self._config = config
        self._pods = pods
        self._netns = netns
        self._plan: HTBPlan | None = None
        self._filters: dict[str, int] | None = None
        self._dirty = True
        self._loop = Periodic("qos-network", self._step, interval_s)

    def set_config(self, config: QoSConfig) -> None:
        """Use a new NodeSLO: the tree is rebuilt at the next loop step (or call `setup()`)."""
        self._config = config
        self._dirty = True

    def start(self) -> None:
        """Set up, then keep filters in sync every `interval_s`, in a daemon thread, until `stop()`."""
        log.info("Starting network QoS", extra={"ifname": self._ifname, "netns": self._netns or ""})
        self._loop.start()

    def stop(self) -> None:
        """Stop the thread; the tree stays (`teardown()` removes it). Idempotent."""
        self._loop.stop()

    def _step(self) -> None:
        if self._dirty:
            self.setup()
        self.sync()

    def setup(self) -> HTBPlan | None:
        """Build the HTB tree from the config, replacing any tree already there. Idempotent.

        With no class enabling network QoS, removes the tree instead. Raises ConfigError for
        impossible rates, NetworkQoSError when netlink refuses.
        """
        plan = htb_plan(self._config, self._total_bps())
        with self._ipr() as ipr:
            index = self._index(ipr)
            self._delete_root(ipr, index)
            self._plan, self._filters = None, None
            if plan is None:
                self._dirty = False
                log.log(V(2), "Network QoS off; no HTB tree", extra={"ifname": self._ifname})
                return None
            self._tc(ipr, "add", "htb", index, ROOT_HANDLE, default=SYSTEM_CLASS & 0xFFFF)  # minor id only
            self._add_class(
                ipr, index, ROOT_CLASS, parent=ROOT_HANDLE, rate_bps=plan.total_bps, ceil_bps=plan.total_bps
            )
            for leaf in plan.classes:
                self._add_class(
                    ipr, index, leaf.classid, parent=ROOT_CLASS, rate_bps=leaf.rate_bps, ceil_bps=leaf.ceil_bps
                )
        self._plan, self._dirty = plan, False
        log.log(
            V(2),
            "Set up network QoS",
            extra={
                "ifname": self._ifname,
                "total_bps": plan.total_bps,
                "classes": ",".join(f"{c.name}={c.rate_bps}/{c.ceil_bps}" for c in plan.classes),
            },
        )
        return plan

    def sync(self) -> bool:
        """Make the filters match the current pods; returns whether anything changed."""
        if self._plan is None:
            return False
        wanted = pod_classes(self._pods(), self._plan)
        if wanted == self._filters:
            return False
        with self._ipr() as ipr:
            index = self._index(ipr)
            try:  # all of ours at once (also any a failed earlier sync left behind)
                ipr.tc("del-filter", index=index, parent=ROOT_HANDLE, prio=FILTER_PRIO, protocol=ETH_P_IP)
            except NetlinkError as e:
                if e.code not in (errno.ENOENT, errno.EINVAL):
                    raise NetworkQoSError(f"interface {self._ifname}: cannot remove filters: {e}") from e
            for address, classid in sorted(wanted.items()):
                key = f"0x{int(ipaddress.IPv4Address(address)):08x}/0xffffffff+12"
                self._tc(
                    ipr,
                    "add-filter",
                    "u32",
                    index,
                    parent=ROOT_HANDLE,
                    prio=FILTER_PRIO,
                    protocol=ETH_P_IP,
                    target=classid,
                    keys=[key],
                )
        self._filters = wanted
        log.log(V(4), "Synced network QoS filters", extra={"ifname": self._ifname, "pods": len(wanted)})
        return True

    def teardown(self) -> None:
        """Remove the HTB tree (root qdisc, classes, filters). Safe when nothing is there."""
        with self._ipr() as ipr:
            self._delete_root(ipr, self._index(ipr))
        self._plan, self._filters, self._dirty = None, None, True
        log.log(V(2), "Removed network QoS", extra={"ifname": self._ifname})

    def installed(self) -> Mapping[str, int]:
        """The filters last installed (pod IP → classid); for tests and diagnostics."""
        return dict(self._filters or {})

    # --- netlink -----------------------------------------------------------------------------------

    def _ipr(self) -> IPRoute:
        try:
            return IPRoute(netns=self._netns) if self._netns else IPRoute()
        except (OSError, NetlinkError) as e:
            raise NetworkQoSError(f"netns {self._netns}: cannot open netlink: {e}") from e

    def _index(self, ipr: IPRoute) -> int:
        found = ipr.link_lookup(ifname=self._ifname)
        if not found:
            raise NetworkQoSError(
                f"interface {self._ifname}: not found" + (f" in netns {self._netns}" if self._netns else "")
            )
        return int(found[0])

    def _tc(self, ipr: IPRoute, command: str, *args: object, **kwargs: object) -> None:
        try:
            ipr.tc(command, *args, **kwargs)
        except NetlinkError as e:
            raise NetworkQoSError(f"interface {self._ifname}: tc {command} {args[:1]} failed: {e}") from e

    def _add_class(self, ipr: IPRoute, index: int, classid: int, *, parent: int, rate_bps: int, ceil_bps: int) -> None:
        self._tc(
            ipr,
            "add-class",
            "htb",
            index,
            classid,
            parent=parent,
            rate=_bits(rate_bps),
            ceil=_bits(ceil_bps),
            quantum=_quantum(rate_bps),
        )

    def _delete_root(self, ipr: IPRoute, index: int) -> None:
        try:
            ipr.tc("del", "htb", index, ROOT_HANDLE)
        except NetlinkError as e:
            if e.code not in (errno.ENOENT, errno.EINVAL):
                raise NetworkQoSError(f"interface {self._ifname}: cannot remove root qdisc: {e}") from e

    def _total_bps(self) -> int:
        configured = self._config.system.total_network_bandwidth_bps
        if configured:
            return configured
        speed = Path("/sys/class/net", self._ifname, "speed")
        try:
            mbits = int(speed.read_text().strip()) if self._netns is None else -1
        except (OSError, ValueError):
            mbits = -1
        if mbits <= 0:
            raise ConfigError(
                f"systemStrategy.totalNetworkBandwidth: not set, and the speed of {self._ifname} is unknown; set it"
            )
        return mbits * 1_000_000


def _bits(bps: int) -> str:
    return f"{bps}bit"


def _quantum(bps: int) -> int:
    """HTB's per-round bytes: rate/10 as the kernel would, kept in 1 MTU..200 kB so it never warns."""
    return max(1514, min(200_000, bps // 8 // 10))
