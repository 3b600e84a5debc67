"""Arguments of DynamicResources: how a node is scored with the GPUs a pod's claims take (the
same strategy DeviceShare scores Koordinator-protocol pods with), and the allocator's bound on
the device combinations it tries per node. Every problem is reported at startup, at once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.errors import ConfigError
from apis.extension import names
from scheduler.framework.scoring import ScoringStrategy, ScoringStrategyType, parse_scoring_strategy
from scheduler.plugins.dynamicresources.allocator import DEFAULT_MAX_STEPS

#: DeviceShare's default for GPUs: LeastAllocated over GPU memory (both forms).
DEFAULT_SCORING = ScoringStrategy(
    ScoringStrategyType.LEAST_ALLOCATED, ((names.GPU_MEMORY_RATIO, 1), (names.GPU_MEMORY, 1))
)
_KEYS = frozenset({"scoringStrategy", "maxSteps"})


@dataclass(frozen=True, slots=True)
class DynamicResourcesArgs:
    scoring: ScoringStrategy = DEFAULT_SCORING
    #: Device combinations the allocator tries on one node before it gives up on it.
    max_steps: int = DEFAULT_MAX_STEPS

    @classmethod
    def from_dict(cls, raw: Mapping[str, object] | None) -> DynamicResourcesArgs:
        """Raises ConfigError naming every problem."""
        raw = raw or {}
        problems = [f"{k}: unknown field (allowed: {', '.join(sorted(_KEYS))})" for k in raw if k not in _KEYS]
        scoring = parse_scoring_strategy(
            raw.get("scoringStrategy"), default=DEFAULT_SCORING, where="scoringStrategy", problems=problems
        )
        steps = raw.get("maxSteps", DEFAULT_MAX_STEPS)
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            problems.append(f"maxSteps: expected a positive integer, got {steps!r}")
            steps = DEFAULT_MAX_STEPS
        if problems:
            raise ConfigError("; ".join(problems))
        return cls(scoring, steps)
