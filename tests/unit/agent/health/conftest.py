"""Health fixtures: a tracker on a manual clock, recording every change."""

from __future__ import annotations

import pytest

from agent.health.clock import ManualClock
from agent.health.tracker import Health, HealthTracker

QUIET_S = 60.0


class Recorder:
    """Subscribes to a tracker and keeps every (device, health) change."""

    def __init__(self, tracker: HealthTracker) -> None:
        self.changes: list[tuple[str, Health]] = []
        tracker.subscribe(lambda device, health: self.changes.append((device, health)))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def tracker(clock: ManualClock) -> HealthTracker:
    return HealthTracker(clock, quiet_period_s=QUIET_S)


@pytest.fixture
def recorder(tracker: HealthTracker) -> Recorder:
    return Recorder(tracker)
