"""The health state machine: faults, lasting problems, quiet periods, resets, callbacks."""

from __future__ import annotations

import pytest

from agent.health.clock import ManualClock
from agent.health.tracker import REASON_RECOVERED, Health, HealthTracker

GPU = "GPU-0"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def tracker(clock: ManualClock) -> HealthTracker:
    return HealthTracker(clock, quiet_period_s=300)


@pytest.fixture
def changes(tracker: HealthTracker) -> list[tuple[str, Health]]:
    seen: list[tuple[str, Health]] = []
    tracker.subscribe(lambda device, health: seen.append((device, health)))
    return seen


def test_unknown_devices_are_healthy_without_a_condition(tracker: HealthTracker) -> None:
    assert tracker.health(GPU) == Health(healthy=True, reason="", message="", since="")


def test_a_fault_makes_the_device_unhealthy_at_once(tracker: HealthTracker, changes: list[tuple[str, Health]]) -> None:
    tracker.fault(GPU, reason="Xid48", message="XID 48: Double-bit ECC error")
    unhealthy = Health(False, "Xid48", "XID 48: Double-bit ECC error", "2024-01-01T00:00:00Z")
    assert tracker.health(GPU) == unhealthy
    assert changes == [(GPU, unhealthy)]


def test_recovers_after_the_quiet_period(
    tracker: HealthTracker, clock: ManualClock, changes: list[tuple[str, Health]]
) -> None:
    tracker.fault(GPU, reason="Xid92", message="m")
    clock.advance(299)
    tracker.tick()
    assert not tracker.health(GPU).healthy
    clock.advance(1)
    tracker.tick()
    assert tracker.health(GPU) == Health(True, REASON_RECOVERED, "no device error for 300s", "2024-01-01T00:05:00Z")
    assert [h.healthy for _, h in changes] == [False, True]


def test_a_repeated_error_restarts_the_quiet_period_without_a_change(
    tracker: HealthTracker, clock: ManualClock, changes: list[tuple[str, Health]]
) -> None:
    tracker.fault(GPU, reason="Xid92", message="m")
    clock.advance(200)
    tracker.fault(GPU, reason="Xid92", message="m")
    clock.advance(200)
    tracker.tick()
    assert not tracker.health(GPU).healthy
    assert len(changes) == 1  # same reason and message: nothing new to report


def test_a_reset_xid_waits_for_a_reset_and_then_the_quiet_period(tracker: HealthTracker, clock: ManualClock) -> None:
    tracker.fault(GPU, reason="Xid79", message="m", needs_reset=True)
    clock.advance(3600)
    tracker.tick()
    assert tracker.health(GPU).reason == "Xid79" and not tracker.health(GPU).healthy
    tracker.reset_seen(GPU)
    assert tracker.health(GPU).healthy  # the quiet period had passed already


def test_a_reset_before_the_quiet_period_ends_still_waits_for_it(tracker: HealthTracker, clock: ManualClock) -> None:
    tracker.fault(GPU, reason="Xid79", message="m", needs_reset=True)
    clock.advance(10)
    tracker.reset_seen(GPU)
    assert not tracker.health(GPU).healthy
    clock.advance(290)
    tracker.tick()
    assert tracker.health(GPU).healthy


def test_a_lasting_problem_holds_until_cleared_then_the_quiet_period_runs(
    tracker: HealthTracker, clock: ManualClock, changes: list[tuple[str, Health]]
) -> None:
    tracker.problem("nic", "ports", reason="PortNotActive", message="port 1 is DOWN")
    clock.advance(1000)
    tracker.problem("nic", "ports", reason="PortNotActive", message="port 1 is DOWN")
    tracker.tick()
    assert tracker.health("nic").reason == "PortNotActive"
    tracker.clear("nic", "ports")
    clock.advance(299)
    tracker.tick()
    assert not tracker.health("nic").healthy
    assert tracker.health("nic").reason == "PortNotActive"  # the last error names the cause
    clock.advance(1)
    tracker.tick()
    assert tracker.health("nic").healthy
    assert [h.healthy for _, h in changes] == [False, True]


def test_the_newest_problem_names_the_reason(tracker: HealthTracker) -> None:
    tracker.fault(GPU, reason="Xid92", message="ecc")
    tracker.problem(GPU, "lost", reason="GPULost", message="gone")
    assert tracker.health(GPU).reason == "GPULost"
    tracker.clear(GPU, "lost")
    assert tracker.health(GPU).reason == "GPULost"
    assert tracker.health(GPU).since == "2024-01-01T00:00:00Z"  # unchanged: it never turned healthy


def test_clear_and_reset_of_unknown_devices_change_nothing(
    tracker: HealthTracker, changes: list[tuple[str, Health]]
) -> None:
    tracker.clear("x", "ports")
    tracker.reset_seen("x")
    tracker.tick()
    assert changes == [] and tracker.snapshot() == {}


def test_recovery_then_a_new_fault_moves_since(tracker: HealthTracker, clock: ManualClock) -> None:
    tracker.fault(GPU, reason="Xid92", message="m")
    clock.advance(300)
    tracker.tick()
    clock.advance(60)
    tracker.fault(GPU, reason="Xid94", message="n")
    assert tracker.health(GPU) == Health(False, "Xid94", "n", "2024-01-01T00:06:00Z")
