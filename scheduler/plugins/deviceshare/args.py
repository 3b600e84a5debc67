"""Arguments of DeviceShare: how devices and nodes are scored, which placement policy runs, and
which GPUs must not be shared (Koordinator's `gpuShareUnsupportedModels`)."""

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
_KEYS = frozenset({"scoringStrategy", "allocationPolicy", "targetWorkload", "gpuShareUnsupportedModels"})
_MODEL_KEYS = frozenset({"vendor", "model"})


@dataclass(frozen=True, slots=True)
class DeviceShareArgs:
    scoring: ScoringStrategy = DEFAULT_SCORING
    #: FragmentationAware by default, with GPUFragmentation ranking nodes (the default profile).
    allocation_policy: str = FragmentationAwarePolicy.name
    #: What a policy that measures fragmentation measures it against (learned by default).
    workload: fragmentation.WorkloadArgs = field(default_factory=fragmentation.WorkloadArgs)
    #: `gpuShareUnsupportedModels`: (vendor, model) pairs, as the node labels
    #: `node.koordinator.sh/gpu-vendor` and `gpu-model` spell them, whose GPUs are never shared: a
    #: pod asking for a share of a GPU does not go to such a node.
    share_unsupported_models: frozenset[tuple[str, str]] = frozenset()

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
        unsupported = _unsupported_models(raw.get("gpuShareUnsupportedModels"), problems)
        if problems:
            raise ConfigError("; ".join(problems))
        assert isinstance(policy, str)
        return cls(scoring, policy, workload, unsupported)


def _unsupported_models(raw: object, problems: list[str]) -> frozenset[tuple[str, str]]:
    """`[{vendor: huawei, model: Ascend-310P3-300I-DUO}, ...]` as Koordinator's
    `GPUShareUnsupportedModel` list; every entry names both."""
    where = "gpuShareUnsupportedModels"
    if raw is None:
        return frozenset()
    if not isinstance(raw, list):
        problems.append(f"{where}: expected a list of {{vendor, model}}")
        return frozenset()
    out = set()
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping):
            problems.append(f"{where}[{i}]: expected {{vendor, model}}")
            continue
        unknown = sorted(str(k) for k in entry if k not in _MODEL_KEYS)
        if unknown:
            problems.append(f"{where}[{i}]: unknown field {', '.join(unknown)} (allowed: model, vendor)")
        vendor, model = entry.get("vendor"), entry.get("model")
        if not isinstance(vendor, str) or not vendor or not isinstance(model, str) or not model:
            problems.append(f"{where}[{i}]: vendor and model must both be non-empty strings, got {dict(entry)!r}")
            continue
        out.add((vendor, model))
    return frozenset(out)
