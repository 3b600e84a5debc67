"""Health fixtures: a tracker on a manual clock, recording every change."""

from __future__ import annotations

import pytest

from agent.health.clock import ManualClock
from agent.health.tracker import HealthTracker
from tests.unit.agent.health.recording import QUIET_S, Recorder


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def tracker(clock: ManualClock) -> HealthTracker:
    return HealthTracker(clock, quiet_period_s=QUIET_S)


@pytest.fixture
def recorder(tracker: HealthTracker) -> Recorder:
    return Recorder(tracker)
