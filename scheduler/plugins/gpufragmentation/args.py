"""Arguments of GPUFragmentation: the target workload fragmentation is measured against."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.errors import ConfigError
from scheduler import fragmentation

_KEYS = frozenset({"targetWorkload"})


@dataclass(frozen=True, slots=True)
class GPUFragmentationArgs:
    #: Learned from the pods seen (the default), or a fixed list of shapes.
    workload: fragmentation.WorkloadArgs = field(default_factory=fragmentation.WorkloadArgs)

    @classmethod
    def from_dict(cls, raw: Mapping[str, object] | None) -> GPUFragmentationArgs:
        """Raises ConfigError naming every problem."""
        raw = raw or {}
        problems = [f"{k}: unknown field (allowed: {', '.join(sorted(_KEYS))})" for k in raw if k not in _KEYS]
        workload = fragmentation.parse_workload_args(
            raw.get("targetWorkload"), where="targetWorkload", problems=problems
        )
        if problems:
            raise ConfigError("; ".join(problems))
        return cls(workload)
