"""Arguments of Coscheduling, as Koordinator's CoschedulingArgs: the default wait and match policy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.errors import ConfigError
from apis.extension.gang import DEFAULT_WAITING_SECONDS, MatchPolicy, parse_duration

_KEYS = frozenset({"defaultTimeout", "defaultMatchPolicy"})


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    #: How long members wait at Permit when a gang says nothing (`600s`).
    default_timeout: float = DEFAULT_WAITING_SECONDS
    default_match_policy: MatchPolicy = MatchPolicy.ONCE_SATISFIED

    @classmethod
    def from_dict(cls, raw: Mapping[str, object] | None) -> CoschedulingArgs:
        """Raises ConfigError naming every problem."""
        raw = raw or {}
        problems = [f"{k}: unknown field (allowed: {', '.join(sorted(_KEYS))})" for k in raw if k not in _KEYS]
        timeout = DEFAULT_WAITING_SECONDS
        raw_timeout = raw.get("defaultTimeout")
        if raw_timeout is not None:
            try:
                timeout = parse_duration(str(raw_timeout))
            except ValueError as e:
                problems.append(f"defaultTimeout: {e}")
            if timeout <= 0:
                problems.append(f"defaultTimeout: must be positive, got {raw_timeout!r}")
        policy = MatchPolicy.ONCE_SATISFIED
        raw_policy = raw.get("defaultMatchPolicy")
        if raw_policy is not None:
            try:
                policy = MatchPolicy(raw_policy)
            except ValueError:
                known = ", ".join(p.value for p in MatchPolicy)
                problems.append(f"defaultMatchPolicy: {raw_policy!r} is not one of {known}")
        if problems:
            raise ConfigError("; ".join(problems))
        return cls(timeout, policy)
