"""What a soak is asked to do: its flags as one value, checked before anything starts."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from apis.errors import ConfigError
from apis.extension.gang import parse_duration
from cli.bench.soak.invariants import Bounds
from cli.localcluster.components import QUOTA_RECLAIM_GRACE
from cli.localcluster.settings import MAX_NODES

__all__ = ["SoakSettings", "duration"]


def duration(text: str) -> float:
    """`90s`, `10m`, `1h30m` or plain seconds (`90`); ConfigError names the text."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_duration(text)
    except ValueError as e:
        raise ConfigError(f"{text!r} is not a duration such as 90s, 10m or 1h30m") from e


@dataclass(frozen=True, slots=True)
class SoakSettings:
    #: How long the workload runs and components are killed; then the soak lets things settle.
    duration_s: float = 600.0
    #: Simulated GPU nodes, each its own agent process.
    nodes: int = 50
    profile: str = "a100-8x"
    #: Mean seconds between kills (each gap drawn uniformly from half to one and a half of it).
    kill_interval_s: float = 20.0
    #: Mean seconds between GPU faults (an XID 79, recovered by a reset `fault_duration_s` later).
    fault_interval_s: float = 15.0
    fault_duration_s: float = 20.0
    #: Mean seconds between node losses (an agent frozen for `node_down_s`; see chaos.NodeLoss).
    node_loss_interval_s: float = 45.0
    node_down_s: float = 30.0
    #: The node lifecycle controller's grace (`--node-monitor-grace-period`; kube: 40 s) and the
    #: agents' Lease renewal (kube: 10 s), short so that a lost node is noticed while it is lost.
    node_monitor_grace_s: float = 8.0
    node_lease_interval_s: float = 2.0
    #: How long the soak's pods tolerate an unreachable or not-ready node before they are evicted
    #: (their NoExecute tolerations' tolerationSeconds; kube's default 300 s).
    eviction_toleration_s: float = 8.0
    #: Pods (or gangs) created per second, while the GPUs in use stay below `target_load`.
    rate: float = 2.0
    #: The share of the cluster's GPUs the workload keeps busy, at most.
    target_load: float = 0.5
    #: Seconds a pod lives once bound, drawn uniformly from this range; then the soak deletes it.
    lifetime_s: tuple[float, float] = (10.0, 60.0)
    #: Seconds between invariant checks.
    check_interval_s: float = 3.0
    #: A pod that fits is bound within this long (after its creation or the last kill).
    pending_bound_s: float = 30.0
    #: The Strict gangs' waiting time.
    gang_waiting_s: float = 30.0
    seed: int = 1
    #: Where the system keeps its objects and logs; None: a temporary directory, removed after.
    data_dir: Path | None = None
    start_timeout_s: float = 180.0

    def validate(self) -> None:
        """Raise ConfigError naming every problem at once."""
        problems = []
        for flag, value in (
            ("--duration", self.duration_s),
            ("--kill-interval", self.kill_interval_s),
            ("--fault-interval", self.fault_interval_s),
            ("--node-loss-interval", self.node_loss_interval_s),
            ("--node-down", self.node_down_s),
            ("--node-monitor-grace", self.node_monitor_grace_s),
            ("--eviction-toleration", self.eviction_toleration_s),
            ("--rate", self.rate),
            ("--pending-bound", self.pending_bound_s),
            ("--check-interval", self.check_interval_s),
        ):
            if not 0 < value < math.inf:
                problems.append(f"{flag} must be a positive number of seconds, got {value:g}")
        if self.node_monitor_grace_s <= 2 * self.node_lease_interval_s:
            problems.append(
                f"--node-monitor-grace ({self.node_monitor_grace_s:g} s) must be more than two Lease renewals "
                f"({self.node_lease_interval_s:g} s each), or live nodes are judged lost"
            )
        if not 1 <= self.nodes <= MAX_NODES:
            problems.append(f"--nodes must be between 1 and {MAX_NODES}, got {self.nodes}")
        if not 0 < self.target_load <= 1:
            problems.append(f"--target-load must be within (0, 1], got {self.target_load:g}")
        if problems:
            raise ConfigError("; ".join(problems))

    def bounds(self) -> Bounds:
        """The liveness bounds: generous on a loaded machine, derived from the settings."""
        return Bounds(
            pending_s=self.pending_bound_s,
            gang_waiting_s=self.gang_waiting_s,
            gang_slack_s=self.pending_bound_s,
            health_s=max(10.0, 2 * self.check_interval_s),
            eviction_s=self.eviction_toleration_s,
            reclaim_grace_s=QUOTA_RECLAIM_GRACE,
            reclaim_slack_s=self.check_interval_s + 3.0,
        )

    @property
    def node_monitor_period_s(self) -> float:
        """How often the node lifecycle controller looks (kube: 5 s of a 40 s grace)."""
        return max(0.5, self.node_monitor_grace_s / 8)

    @property
    def node_delete_after_s(self) -> float:
        """When, into a loss, the lost Node is deleted (every other loss): once the controller has
        had time to judge it lost and evict its pods."""
        return self.node_monitor_grace_s + self.node_monitor_period_s + self.eviction_toleration_s + 5.0

    def kube_controller_manager_args(self) -> tuple[str, ...]:
        return (
            "--node-monitor-grace-period",
            f"{self.node_monitor_grace_s:g}",
            "--node-monitor-period",
            f"{self.node_monitor_period_s:g}",
        )

    def agent_args(self) -> tuple[str, ...]:
        return ("--node-lease-interval", f"{self.node_lease_interval_s:g}")

    @property
    def settle_s(self) -> float:
        """After the last kill: how long the soak waits for the cluster to converge before the
        liveness invariants' graces have all run out (and what is still wrong counts)."""
        return self.pending_bound_s + self.gang_waiting_s + self.pending_bound_s + 2 * self.check_interval_s
