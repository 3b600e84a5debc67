"""BE CPU suppression: every second, cap best-effort pods at what latency-sensitive work leaves.

Koordinator's rule (koordlet CPUSuppress, `cfsQuota` policy):

    BE allowance = node capacity × cpuSuppressThresholdPercent − non-BE pod usage − system usage

floored at `cpuSuppressMinPercent` of the node (or 2 ms per 100 ms period), written as the CFS
quota of the BestEffort QoS cgroup. To avoid churn a change smaller than 1% of the node is
skipped (except down to the floor), and an increase is limited to 10% of the node per step, so
BE grows back slowly but is cut at once when LS load rises. With the threshold disabled the
quota is restored to unlimited once.

`decide` is the pure rule; `BESuppressor` samples, decides, writes (`Enforcer.limit_subtree`, so
v1 accepts lowering a parent below its children) and exports the Prometheus gauge
`tessera_agent_be_suppress_cpu_cores` — the CPU BE may use now, in cores (node capacity when
unlimited).

Wiring (the agent process):

    suppressor = BESuppressor(cgroups=kube_cgroups, sampler=CgroupUsageSampler(kube_cgroups, pods),
                              config=qos_config, registry=registry)
    suppressor.start()   # a daemon thread (agent.periodic); suppressor.stop() at shutdown
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from prometheus_client import CollectorRegistry, Gauge

from agent.periodic import Periodic
from agent.qos import convert, enforce, knobs
from agent.qos.cgroups import CgroupError, CgroupNotFound
from agent.qos.config import CPUSuppressConfig, QoSConfig, SuppressPolicy
from agent.qos.knobs import CPUMax
from agent.qos.layout import KubeCgroups
from agent.qos.usage import Sampler, UsageSample
from apis.extension.qos import KubeQoSClass
from kube.logs import V

__all__ = ["BESuppressor", "Decision", "decide"]

log = logging.getLogger(__name__)

#: Koordinator's constants (cpu_suppress.go).
BE_MIN_QUOTA_US: Final = 2000
MIN_DELTA_PERCENT: Final = 1
MAX_INCREASE_PERCENT: Final = 10


@dataclass(frozen=True, slots=True)
class Decision:
    """One step's outcome: the allowance the formula gives, and the limit to write (None: keep)."""

    allowance_milli: int
    limit: CPUMax | None
    reason: str


def decide(
    sample: UsageSample, current: CPUMax, config: CPUSuppressConfig, *, period_us: int = convert.CFS_PERIOD_US
) -> Decision:
    """Koordinator's cfsQuota suppression step. Pure; see the module docstring for the rule."""
    capacity = sample.capacity_milli
    allowance = capacity * config.threshold_percent // 100 - sample.non_be_used_milli - sample.system_used_milli
    floor_quota = BE_MIN_QUOTA_US * period_us // convert.CFS_PERIOD_US
    if config.min_percent is not None:
        floor_quota = max(floor_quota, convert.milli_to_quota(capacity * config.min_percent // 100, period_us))
    quota = max(allowance * period_us // 1000, floor_quota, convert.MIN_QUOTA_PERIOD_US)
    allowance = max(allowance, quota * 1000 // period_us)
    if current.unlimited:
        return Decision(allowance, CPUMax(quota, period_us), "suppress")
    current_quota = current.quota * period_us // current.period
    if quota == current_quota:
        return Decision(allowance, None, "unchanged")
    capacity_quota = capacity * period_us // 1000
    if abs(quota - current_quota) < capacity_quota * MIN_DELTA_PERCENT // 100 and quota != floor_quota:
        return Decision(allowance, None, "change below 1% of the node")
    max_increase = capacity_quota * MAX_INCREASE_PERCENT // 100
    if quota - current_quota > max_increase:
        return Decision(allowance, CPUMax(current_quota + max_increase, period_us), "increase, limited per step")
    return Decision(allowance, CPUMax(quota, period_us), "suppress")


class BESuppressor:
    """The 1 s suppression loop over the BestEffort QoS cgroup; see the module docstring.

    `step()` is one iteration (tests call it directly with a fake `Sampler`); `start()`/`stop()`
    run it in a thread. `set_config` may be called from any thread.
    """

    def __init__(
        self,
        *,
        cgroups: KubeCgroups,
        sampler: Sampler,
        config: QoSConfig,
        registry: CollectorRegistry | None,
        period_s: float = 1.0,
    ) -> None:
        self._cgroups = cgroups
        self._sampler = sampler
        self._period_s = period_s
        self._loop = Periodic("qos-be-suppress", self._tick, period_s)
        self._config = config
        self._recovered = False
        #: the last problem logged as a warning; a problem that persists is repeated at V4 only
        self._told = ""
        self._gauge = Gauge(
            "tessera_agent_be_suppress_cpu_cores",
            "CPU best-effort pods may use now (CFS quota of the BestEffort cgroup), in cores",
            registry=registry,
        )
        self.set_config(config)

    def set_config(self, config: QoSConfig) -> None:
        """Use a new NodeSLO from the next step on."""
        if config.cpu_suppress.policy is SuppressPolicy.CPUSET:
            log.warning("cpuset suppression is not implemented; applying cfsQuota", extra={"policy": "cpuset"})
        self._config = config
        self._recovered = False

    def start(self) -> None:
        """Step now and then every `period_s` seconds, in a daemon thread, until `stop()`."""
        log.info("Starting BE CPU suppression", extra={"period_s": self._period_s})
        self._loop.start()

    def stop(self) -> None:
        """Stop the thread after the current step. Idempotent; the BE limit stays as it is."""
        self._loop.stop()

    def _tick(self) -> None:
        self.step()

    def step(self) -> Decision:
        """Sample, decide and write once. Never raises for a missing or refusing cgroup (logged)."""
        config = self._config.cpu_suppress
        sample = self._sampler.sample()
        target = self._cgroups.qos_dir(KubeQoSClass.BEST_EFFORT)
        try:
            if not config.enable:
                return self._recover(sample)
            if sample is None:
                return Decision(0, None, "no sample yet")
            current = target.read(knobs.CPU_MAX)
            decision = decide(sample, current, config)
            if decision.limit is not None:
                enforce.Enforcer().limit_subtree(target, decision.limit)
                log.log(
                    V(4),
                    "Suppressed BE CPU",
                    extra={
                        "cores": decision.limit.milli() / 1000,
                        "reason": decision.reason,
                        "node_used_milli": sample.node_used_milli,
                        "non_be_used_milli": sample.non_be_used_milli,
                        "system_used_milli": sample.system_used_milli,
                    },
                )
            self._gauge.set((decision.limit or current).milli() / 1000)
            self._told = ""
            return decision
        except CgroupNotFound as e:
            self._warn_once("No BestEffort cgroup to suppress", str(e))
            return Decision(0, None, "no BestEffort cgroup")
        except CgroupError as e:
            self._warn_once("Cannot suppress BE CPU", str(e))
            return Decision(0, None, f"error: {e}")

    def _warn_once(self, message: str, detail: str) -> None:
        level = V(4) if detail == self._told else logging.WARNING
        log.log(level, message, extra={"cgroup": str(self._cgroups.qos_dir(KubeQoSClass.BEST_EFFORT)), "error": detail})
        self._told = detail

    def _recover(self, sample: UsageSample | None) -> Decision:
        """Suppression off: lift the BE limit once (Koordinator's recoverCFSQuotaIfNeed)."""
        target = self._cgroups.qos_dir(KubeQoSClass.BEST_EFFORT)
        if not self._recovered:
            if target.write(knobs.CPU_MAX, CPUMax(convert.UNLIMITED)) is not None:
                log.log(V(2), "Lifted BE CPU suppression", extra={"cgroup": str(target)})
            self._recovered = True
        if sample is not None:
            self._gauge.set(sample.capacity_milli / 1000)
        return Decision(sample.capacity_milli if sample else 0, None, "disabled")
