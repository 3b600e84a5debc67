"""CPU usage of the node, of all pods, and of BE pods: the input of BE suppression.

`CgroupUsageSampler` turns cumulative counters into rates between two calls: node busy time from
`/proc/stat` (via psutil), pods from the kubepods cgroup's CPU accounting (`cpuacct.usage` on v1,
`cpu.stat usage_usec` on v2), BE from the cgroups of the pods whose QoS class is BE (found via the
`PodSource`, so a BE-labelled pod in the burstable tree counts as BE), or from the BestEffort QoS
cgroup when no pod source is given. Amounts are integer milli-CPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import psutil

from agent.qos.cgroups import Cgroup, CgroupError, CgroupNotFound
from agent.qos.layout import KubeCgroups
from agent.qos.pods import PodSource
from apis.extension.qos import KubeQoSClass, QoSClass, kube_qos_class, qos_class

__all__ = ["CgroupUsageSampler", "Sampler", "UsageSample", "node_busy_ns"]


@dataclass(frozen=True, slots=True)
class UsageSample:
    """CPU use over the last sampling interval, in milli-CPU."""

    capacity_milli: int
    node_used_milli: int
    pods_used_milli: int
    be_used_milli: int

    @property
    def system_used_milli(self) -> int:
        """Everything that is not a pod (kubelet, runtime, the OS), never negative."""
        return max(0, self.node_used_milli - self.pods_used_milli)

    @property
    def non_be_used_milli(self) -> int:
        return max(0, self.pods_used_milli - self.be_used_milli)


class Sampler(Protocol):
    """Where BE suppression gets its numbers; fake it in tests."""

    def sample(self) -> UsageSample | None:
        """Usage since the previous call; None on the first call (no interval yet)."""
        ...


def node_busy_ns() -> int:
    """CPU time the node spent busy (all CPUs, not idle or iowait) since boot, in ns."""
    t = psutil.cpu_times()
    busy = t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) + getattr(t, "steal", 0.0)
    return int(busy * 1e9)


class CgroupUsageSampler:
    """A `Sampler` over the node's real counters. Not thread-safe: one caller (the suppression loop)."""

    def __init__(
        self,
        cgroups: KubeCgroups,
        pods: PodSource | None = None,
        *,
        capacity_milli: int | None = None,
        busy_ns: Callable[[], int] = node_busy_ns,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cgroups = cgroups
        self._pods = pods
        self._capacity_milli = capacity_milli or (psutil.cpu_count(logical=True) or 1) * 1000
        self._busy_ns = busy_ns
        self._clock = clock
        self._previous: dict[str, int] = {}
        self._previous_at: float | None = None
        self._be_cgroups: dict[str, Cgroup] = {}

    def sample(self) -> UsageSample | None:
        # Find the BE cgroups first (a directory walk), then read the counters back to back,
        # children before their parent: kubepods' count then covers what the BE reads saw, so
        # BE usage cannot come out above all pods' usage however slow the walk was.
        sources = self._be_sources()
        now = self._clock()
        counters = {cg.rel: self._usage(cg) for cg in sources}
        counters["pods"] = self._usage(self._cgroups.kubepods())
        counters["node"] = self._busy_ns()
        previous, previous_at = self._previous, self._previous_at
        self._previous, self._previous_at = counters, now
        if previous_at is None or now <= previous_at:
            return None
        elapsed_ns = int((now - previous_at) * 1e9)

        def rate(key: str) -> int:
            if key not in previous or counters[key] < 0 or previous[key] < 0:
                return 0  # new cgroup this interval, or unreadable: no rate yet
            return max(0, counters[key] - previous[key]) * 1000 // elapsed_ns

        be = sum(rate(key) for key in counters if key not in ("node", "pods"))
        return UsageSample(self._capacity_milli, rate("node"), rate("pods"), be)

    def _be_sources(self) -> list[Cgroup]:
        """The cgroups whose usage counts as BE: BE pods' cgroups, or the BestEffort QoS cgroup."""
        if self._pods is None:
            return [self._cgroups.qos_dir(KubeQoSClass.BEST_EFFORT)]
        found: dict[str, Cgroup] = {}
        for pod in self._pods():
            if pod.is_terminal or qos_class(pod) is not QoSClass.BE:
                continue
            cg = self._be_cgroups.get(pod.uid) or self._cgroups.find_pod(pod.uid, kube_qos_class(pod))
            if cg is not None:
                found[pod.uid] = cg
        self._be_cgroups = found
        return list(found.values())

    def _usage(self, cg: Cgroup) -> int:
        """Cumulative ns, or -1 when the cgroup is gone or unreadable (counted as no usage)."""
        try:
            return cg.cpu_usage_ns()
        except CgroupNotFound:
            self._be_cgroups = {uid: c for uid, c in self._be_cgroups.items() if c.rel != cg.rel}
            return -1
        except CgroupError:
            return -1
