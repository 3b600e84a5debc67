"""When a ready pod counts as available: ready for at least minReadySeconds (kube's IsPodAvailable)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

__all__ = ["available", "ready_since"]


def ready_since(pod: Mapping[str, Any]) -> float | None:
    """When the pod's Ready condition last became True (seconds since the epoch), if it is True."""
    for c in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True":
            stamp = c.get("lastTransitionTime")
            if not isinstance(stamp, str):
                return 0.0
            try:
                return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            except ValueError:
                return 0.0
    return None


def available(pod: Mapping[str, Any], min_ready_seconds: int, now: float) -> bool:
    since = ready_since(pod)
    if since is None:
        return False
    return min_ready_seconds <= 0 or since + min_ready_seconds <= now
