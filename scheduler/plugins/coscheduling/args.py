"""Arguments of Coscheduling: Koordinator's CoschedulingArgs (the default wait and match policy of
its gangs) and, for scheduler-plugins' PodGroups, that project's `permitWaitingTimeSeconds`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.errors import ConfigError
from apis.extension.gang import (
    DEFAULT_WAITING_SECONDS,
    UPSTREAM_DEFAULT_WAITING_SECONDS,
    MatchPolicy,
    parse_duration,
)

_KEYS = frozenset({"defaultTimeout", "defaultMatchPolicy", "permitWaitingTimeSeconds"})


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    #: How long members wait at Permit when a gang says nothing (`600s`).
    default_timeout: float = DEFAULT_WAITING_SECONDS
    default_match_policy: MatchPolicy = MatchPolicy.ONCE_SATISFIED
    #: How long members of a scheduler-plugins PodGroup without `scheduleTimeoutSeconds` wait
    #: (scheduler-plugins' argument and default, 60 s; 0 means the default there too).
    permit_waiting_seconds: float = UPSTREAM_DEFAULT_WAITING_SECONDS

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
        permit = UPSTREAM_DEFAULT_WAITING_SECONDS
        raw_permit = raw.get("permitWaitingTimeSeconds")
        if raw_permit is not None:
            if isinstance(raw_permit, bool) or not isinstance(raw_permit, int) or raw_permit < 0:
                problems.append(f"permitWaitingTimeSeconds: must be a whole number ≥ 0, got {raw_permit!r}")
            elif raw_permit > 0:
                permit = float(raw_permit)
        if problems:
            raise ConfigError("; ".join(problems))
        return cls(timeout, policy, permit)
