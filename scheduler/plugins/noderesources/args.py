"""Arguments of NodeResourcesFit (kube-scheduler's NodeResourcesFitArgs, the parts we use)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.errors import ConfigError
from apis.extension import devicetypes, names
from scheduler.framework.scoring import ScoringStrategy, ScoringStrategyType, parse_scoring_strategy

DEFAULT_SCORING = ScoringStrategy(ScoringStrategyType.LEAST_ALLOCATED, ((names.CPU, 1), (names.MEMORY, 1)))
#: Device resources are DeviceShare's: the Device CR, not node allocatable, says what is free, so
#: checking them here too would reject pods on nodes whose allocatable lags the CR.
DEFAULT_IGNORED = devicetypes.RESOURCE_NAMES
_KEYS = frozenset({"ignoredResources", "ignoredResourceGroups", "scoringStrategy"})


@dataclass(frozen=True, slots=True)
class NodeResourcesFitArgs:
    #: Resource names not checked by Filter.
    ignored_resources: frozenset[str] = DEFAULT_IGNORED
    #: Resource name prefixes (`example.com` ignores `example.com/*`) not checked by Filter.
    ignored_resource_groups: frozenset[str] = frozenset()
    scoring: ScoringStrategy = DEFAULT_SCORING

    def ignores(self, resource: str) -> bool:
        return resource in self.ignored_resources or resource.split("/", 1)[0] in self.ignored_resource_groups

    @classmethod
    def from_dict(cls, raw: Mapping[str, object] | None) -> NodeResourcesFitArgs:
        """Raises ConfigError naming every problem."""
        raw = raw or {}
        problems = [f"{k}: unknown field (allowed: {', '.join(sorted(_KEYS))})" for k in raw if k not in _KEYS]
        ignored = _names(raw.get("ignoredResources"), "ignoredResources", problems)
        groups = _names(raw.get("ignoredResourceGroups"), "ignoredResourceGroups", problems)
        scoring = parse_scoring_strategy(
            raw.get("scoringStrategy"), default=DEFAULT_SCORING, where="scoringStrategy", problems=problems
        )
        if problems:
            raise ConfigError("; ".join(problems))
        return cls(
            ignored_resources=DEFAULT_IGNORED if ignored is None else frozenset(ignored),
            ignored_resource_groups=frozenset(groups or ()),
            scoring=scoring,
        )


def _names(raw: object, where: str, problems: list[str]) -> list[str] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(x, str) and x for x in raw):
        problems.append(f"{where}: expected a list of resource names")
        return None
    return list(raw)
