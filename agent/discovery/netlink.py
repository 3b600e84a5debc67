"""Network interface facts over netlink (pyroute2): name, MAC, operational state and speed.

The RDMA source asks it about each RDMA NIC's netdev, so the inventory knows the interface name
and whether its link is up. Name, MAC and state come from rtnetlink (RTM_GETLINK); speed from
ethtool (its generic-netlink family, pyroute2 falling back to the ioctl on old kernels).
pyroute2's errors are wrapped in DiscoveryError here and nowhere else.

pyroute2 is imported on first use: it adds about 8 MiB to the agent's memory, which nodes without
RDMA NICs (and simulated nodes) need not pay.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from agent.discovery.model import LinkInfo
from apis.errors import DiscoveryError

__all__ = ["LinkReader"]

log = logging.getLogger(__name__)


class LinkReader:
    """Reads one interface at a time; opens and closes its netlink sockets per call.

    `netns` names a network namespace (`ip netns add NAME`) to read instead of the agent's own;
    it switches the calling thread's namespace for the call (pyroute2 `pushns`), so it is meant
    for tests and tools, not for concurrent use.
    """

    def __init__(self, netns_name: str | None = None) -> None:
        self._netns = netns_name

    def read(self, ifname: str) -> LinkInfo | None:
        """The interface's facts, or None when there is no such interface. Raises DiscoveryError."""
        from pyroute2 import IPRoute
        from pyroute2.netlink.exceptions import NetlinkError

        with self._namespace():
            try:
                with IPRoute() as ipr:
                    indexes = ipr.link_lookup(ifname=ifname)
                    if not indexes:
                        return None
                    msg = ipr.get_links(indexes[0])[0]
            except (NetlinkError, OSError) as e:
                raise DiscoveryError(f"netlink: cannot read interface {ifname}: {e}") from e
            return LinkInfo(
                name=str(msg.get_attr("IFLA_IFNAME")),
                mac=str(msg.get_attr("IFLA_ADDRESS") or ""),
                oper_state=str(msg.get_attr("IFLA_OPERSTATE") or "UNKNOWN"),
                speed_mbps=_speed(ifname),
            )

    @contextmanager
    def _namespace(self) -> Iterator[None]:
        if self._netns is None:
            yield
            return
        from pyroute2 import netns

        try:
            netns.pushns(self._netns)
        except OSError as e:
            raise DiscoveryError(f"netlink: cannot enter network namespace {self._netns}: {e}") from e
        try:
            yield
        finally:
            netns.popns()


def _speed(ifname: str) -> int | None:
    """Link speed in Mb/s, or None when the driver reports none (no carrier, loopback, some VMs)."""
    from pyroute2 import Ethtool
    from pyroute2.ethtool.ioctl import EthtoolError
    from pyroute2.netlink.exceptions import NetlinkError

    try:
        with Ethtool() as ethtool:
            speed = ethtool.get_link_mode(ifname).speed
    except (EthtoolError, NetlinkError, OSError) as e:
        log.debug("No link speed from ethtool", extra={"interface": ifname, "error": str(e)})
        return None
    return int(speed) if isinstance(speed, int) and 0 < speed < 0xFFFFFFFF else None
