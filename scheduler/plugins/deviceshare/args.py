"""Arguments of DeviceShare: how devices and nodes are scored, and which placement policy runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.errors import ConfigError
from apis.extension import names
from scheduler import fragmentation
from scheduler.framework.scoring import ScoringStrategy, ScoringStrategyType, parse_scoring_strategy
from scheduler.plugins.deviceshare.allocator import POLICIES, FragmentationAwarePolicy

#: The protocol's default: LeastAllocated over memory (both forms), RDMA and FPGA, weight 1 each.
DEFAULT_SCORING = ScoringStrategy(
    ScoringStrategyType.LEAST_ALLOCATED,
    ((names.GPU_MEMORY_RATIO, 1), (names.GPU_MEMORY, 1), (names.RDMA, 1), (names.FPGA, 1)),
)
_KEYS = frozenset({"scoringStrategy", "allocationPolicy", "targetWorkload"})


@dataclass(frozen=True, slots=True)
class DeviceShareArgs:
    scoring: ScoringStrategy = DEFAULT_SCORING
    #: FragmentationAware by default, with GPUFragmentation ranking nodes (the default profile).
    allocation_policy: str = FragmentationAwarePolicy.name
    #: What a policy that measures fragmentation measures it against (learned by default).
    workload: fragmentation.WorkloadArgs = field(default_factory=fragmentation.WorkloadArgs)

    @classmethod
    def from_dict(cls, raw: Mapping[str, object] | None) -> DeviceShareArgs:
        """Raises ConfigError naming every problem."""
        raw = raw or {}
        problems = [f"{k}: unknown field (allowed: {', '.join(sorted(_KEYS))})" for k in raw if k not in _KEYS]
        scoring = parse_scoring_strategy(
            raw.get("scoringStrategy"), default=DEFAULT_SCORING, where="scoringStrategy", problems=problems
        )
        policy = raw.get("allocationPolicy", FragmentationAwarePolicy.name)
        if policy not in POLICIES:
            problems.append(f"allocationPolicy: {policy!r} is not one of {', '.join(sorted(POLICIES))}")
        workload = fragmentation.parse_workload_args(
            raw.get("targetWorkload"), where="targetWorkload", problems=problems
        )
        users = sorted(name for name, factory in POLICIES.items() if factory(scoring).uses_workload)
        if "targetWorkload" in raw and policy in POLICIES and policy not in users:
            problems.append(f"targetWorkload: only used by allocationPolicy {' or '.join(users)}, not {policy}")
        if problems:
            raise ConfigError("; ".join(problems))
        assert isinstance(policy, str)
        return cls(scoring, policy, workload)
