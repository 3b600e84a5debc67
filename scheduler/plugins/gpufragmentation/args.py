"""Arguments of GPUFragmentation: the target workload fragmentation is measured against, and
how close two losses must be to count as a tie."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.errors import ConfigError
from scheduler import fragmentation

_KEYS = frozenset({"balancePercent", "targetWorkload", "tolerancePercent"})

#: Losses closer than this (percent of one GPU per task of the workload) are ties, broken by
#: consolidation. 4 is about the resolution of the paper's integer sigmoid score near zero
#: (100·σ′(0) = 25 points per GPU): see docs/scheduling.md for what it changes.
DEFAULT_TOLERANCE_PERCENT = 4
#: Weight of the CPU/memory balance term (`fragmentation.Balance`) against the loss, in
#: percent: 100 counts a GPU stranded for want of CPU or memory like a GPU lost to
#: fragmentation; 0 is the paper's FGD.
DEFAULT_BALANCE_PERCENT = 100


@dataclass(frozen=True, slots=True)
class GPUFragmentationArgs:
    #: Learned from the pods seen (the default), or a fixed list of shapes.
    workload: fragmentation.WorkloadArgs = field(default_factory=fragmentation.WorkloadArgs)
    #: 0: the exact loss ranks nodes, ties broken at random.
    tolerance_percent: int = DEFAULT_TOLERANCE_PERCENT
    balance_percent: int = DEFAULT_BALANCE_PERCENT

    @classmethod
    def from_dict(cls, raw: Mapping[str, object] | None) -> GPUFragmentationArgs:
        """Raises ConfigError naming every problem."""
        raw = raw or {}
        problems = [f"{k}: unknown field (allowed: {', '.join(sorted(_KEYS))})" for k in raw if k not in _KEYS]
        workload = fragmentation.parse_workload_args(
            raw.get("targetWorkload"), where="targetWorkload", problems=problems
        )
        tolerance = _percent(raw, "tolerancePercent", DEFAULT_TOLERANCE_PERCENT, 100, problems)
        balance = _percent(raw, "balancePercent", DEFAULT_BALANCE_PERCENT, 1000, problems)
        if problems:
            raise ConfigError("; ".join(problems))
        return cls(workload, tolerance, balance)


def _percent(raw: Mapping[str, object], key: str, default: int, high: int, problems: list[str]) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        problems.append(f"{key}: expected an integer in 0..{high}, got {value!r}")
        return default
    return value
