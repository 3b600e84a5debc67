"""What the health tests observe: every change the tracker reports, in order, and the quiet
period they run with.
"""

from __future__ import annotations

from agent.health.tracker import Health, HealthTracker

QUIET_S = 60.0


class Recorder:
    """Subscribes to a tracker and keeps every (device, health) change."""

    def __init__(self, tracker: HealthTracker) -> None:
        self.changes: list[tuple[str, Health]] = []
        tracker.subscribe(lambda device, health: self.changes.append((device, health)))
