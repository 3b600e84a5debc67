"""Resource-allocation scoring shared by plugins: LeastAllocated (spread) and MostAllocated (pack).

NodeResourcesFit scores CPU and memory this way and DeviceShare scores devices the same way,
so both live here, below the plugins (plugins never import each other). The arithmetic is
kube-scheduler's: per resource, Least = (capacity − requested) × 100 / capacity and
Most = requested × 100 / capacity (integer division), averaged with weights over the resources
the node has (capacity > 0). `requested` already includes the pod being scored.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.framework.interfaces import MAX_NODE_SCORE

__all__ = ["ScoringStrategy", "ScoringStrategyType", "default_normalize", "parse_scoring_strategy"]


class ScoringStrategyType(enum.Enum):
    LEAST_ALLOCATED = "LeastAllocated"
    MOST_ALLOCATED = "MostAllocated"


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    type: ScoringStrategyType
    #: (resource name, weight) pairs, in a fixed order callers align their numbers with.
    resources: tuple[tuple[str, int], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.resources)

    def score(self, requested: Sequence[int], capacity: Sequence[int]) -> int:
        """Weighted score in [0, 100]; `requested`/`capacity` align with `resources`.

        Resources the node lacks (capacity 0) do not count; with none left the score is 0.
        """
        total = weight_sum = 0
        least = self.type is ScoringStrategyType.LEAST_ALLOCATED
        for (_, weight), req, cap in zip(self.resources, requested, capacity, strict=True):
            if cap <= 0:
                continue
            if least:
                value = 0 if req > cap else (cap - req) * MAX_NODE_SCORE // cap
            else:
                value = MAX_NODE_SCORE if req > cap else req * MAX_NODE_SCORE // cap
            total += value * weight
            weight_sum += weight
        return total // weight_sum if weight_sum else 0

    def score_map(self, requested: Mapping[str, int], capacity: Mapping[str, int]) -> int:
        """As `score`, from name-keyed mappings (missing names count as 0)."""
        names = self.names
        return self.score([requested.get(n, 0) for n in names], [capacity.get(n, 0) for n in names])


def parse_scoring_strategy(
    raw: object, *, default: ScoringStrategy, where: str, problems: list[str]
) -> ScoringStrategy:
    """`{type: LeastAllocated|MostAllocated, resources: [{name, weight}]}`; missing parts default.

    Appends to `problems` instead of raising, so a plugin's args can report everything at once.
    """
    if raw is None:
        return default
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected a mapping with type and resources")
        return default
    for key in raw:
        if key not in ("type", "resources"):
            problems.append(f"{where}.{key}: unknown field (allowed: resources, type)")
    kind = default.type
    if "type" in raw:
        try:
            kind = ScoringStrategyType(raw["type"])
        except ValueError:
            allowed = ", ".join(t.value for t in ScoringStrategyType)
            problems.append(f"{where}.type: {raw['type']!r} is not one of {allowed}")
    resources = default.resources
    if "resources" in raw:
        parsed = []
        items = raw["resources"]
        if not isinstance(items, list) or not items:
            problems.append(f"{where}.resources: expected a non-empty list of {{name, weight}}")
            items = []
        for i, item in enumerate(items):
            name = item.get("name") if isinstance(item, Mapping) else None
            weight = item.get("weight", 1) if isinstance(item, Mapping) else None
            if not isinstance(name, str) or not name:
                problems.append(f"{where}.resources[{i}].name: expected a resource name")
            elif isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
                problems.append(f"{where}.resources[{i}].weight: expected an integer in 1..100, got {weight!r}")
            else:
                parsed.append((name, weight))
        if parsed:
            resources = tuple(parsed)
    return ScoringStrategy(kind, resources)


def default_normalize(scores: list[int], *, reverse: bool = False) -> None:
    """kube-scheduler's DefaultNormalizeScore, in place: scale so the highest is 100; `reverse`
    flips the scale (fewer is better). All zeros stay zeros (or become 100 when reversed)."""
    highest = max(scores, default=0)
    if highest == 0:
        if reverse:
            scores[:] = [MAX_NODE_SCORE] * len(scores)
        return
    if reverse:
        scores[:] = [MAX_NODE_SCORE - s * MAX_NODE_SCORE // highest for s in scores]
    else:
        scores[:] = [s * MAX_NODE_SCORE // highest for s in scores]
