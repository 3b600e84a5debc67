"""The health state machine: faults, lasting problems, quiet periods, resets, callbacks."""

from __future__ import annotations

import pytest

from agent.health.clock import ManualClock
from agent.health.tracker import REASON_CLEARED, REASON_RECOVERED, Health, HealthTracker, ResetFault

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


# --- faults that wait for a reset: listed, restored, cleared -------------------------------------


@pytest.fixture
def reset_changes(tracker: HealthTracker) -> list[dict[str, ResetFault]]:
    """`reset_faults()` as each reset subscriber call saw it."""
    seen: list[dict[str, ResetFault]] = []
    tracker.subscribe_resets(lambda: seen.append(tracker.reset_faults()))
    return seen


def test_reset_faults_list_what_waits_for_a_reset_and_say_when_that_changes(
    tracker: HealthTracker, clock: ManualClock, reset_changes: list[dict[str, ResetFault]]
) -> None:
    tracker.fault(GPU, reason="Xid92", message="ecc rate")  # recovers by itself: nothing to keep
    tracker.fault("GPU-1", reason="Xid79", message="off the bus", needs_reset=True)
    tracker.fault("GPU-1", reason="Xid79", message="off the bus", needs_reset=True)  # a repeat: no change
    clock.advance(60)
    tracker.reset_seen("GPU-1")
    assert reset_changes == [{"GPU-1": ResetFault("Xid79", "off the bus", "2024-01-01T00:00:00Z")}, {}]


def test_the_reset_subscribers_hear_before_the_health_subscribers(tracker: HealthTracker) -> None:
    order: list[str] = []
    tracker.subscribe(lambda device, health: order.append("health"))
    tracker.subscribe_resets(lambda: order.append("resets"))
    tracker.fault(GPU, reason="Xid79", message="m", needs_reset=True)
    assert order == ["resets", "health"]


def test_a_lesser_error_does_not_hide_the_one_a_reset_must_end(tracker: HealthTracker, clock: ManualClock) -> None:
    tracker.fault(GPU, reason="Xid79", message="off the bus", needs_reset=True)
    clock.advance(10)
    tracker.fault(GPU, reason="Xid32", message="push buffer")
    assert tracker.health(GPU).reason == "Xid79"
    assert tracker.reset_faults()[GPU].reason == "Xid79"
    tracker.reset_seen(GPU)
    assert (tracker.health(GPU).healthy, tracker.health(GPU).reason) == (False, "Xid32")  # its quiet period


def test_a_restored_fault_keeps_its_time_and_waits_for_a_reset(
    tracker: HealthTracker, clock: ManualClock, changes: list[tuple[str, Health]]
) -> None:
    fault = ResetFault("Xid79", "XID 79: off the bus", "2023-12-31T22:00:00Z")
    tracker.restore(GPU, fault)
    restored = Health(False, "Xid79", "XID 79: off the bus", "2023-12-31T22:00:00Z")
    assert changes == [(GPU, restored)]
    assert tracker.reset_faults() == {GPU: fault}
    clock.advance(3600)
    tracker.tick()
    assert tracker.health(GPU) == restored
    tracker.reset_seen(GPU)
    clock.advance(300)
    tracker.tick()
    assert tracker.health(GPU).healthy and tracker.reset_faults() == {}


def test_restoring_leaves_a_device_that_already_waits_for_a_reset_alone(tracker: HealthTracker) -> None:
    tracker.fault(GPU, reason="Xid48", message="now", needs_reset=True)
    tracker.restore(GPU, ResetFault("Xid79", "before the restart", "2023-12-31T22:00:00Z"))
    assert tracker.health(GPU) == Health(False, "Xid48", "now", "2024-01-01T00:00:00Z")


def test_an_operator_clear_makes_the_device_healthy_at_once(
    tracker: HealthTracker, clock: ManualClock, reset_changes: list[dict[str, ResetFault]]
) -> None:
    tracker.fault(GPU, reason="Xid79", message="m", needs_reset=True)
    clock.advance(5)
    assert tracker.clear_faults(GPU, message="cleared by an operator")
    cleared = Health(True, REASON_CLEARED, "cleared by an operator", "2024-01-01T00:00:05Z")
    assert tracker.health(GPU) == cleared
    assert reset_changes[-1] == {}
    clock.advance(600)
    tracker.tick()
    assert tracker.health(GPU) == cleared  # no later "Recovered" rewrite
    assert not tracker.clear_faults(GPU, message="again")  # healthy already: nothing to clear


def test_an_operator_clear_cannot_end_a_lasting_problem(tracker: HealthTracker, clock: ManualClock) -> None:
    tracker.fault(GPU, reason="Xid79", message="m", needs_reset=True)
    tracker.problem(GPU, "lost", reason="GPULost", message="gone")
    assert tracker.clear_faults(GPU, message="cleared")
    assert (tracker.health(GPU).healthy, tracker.health(GPU).reason) == (False, "GPULost")
    assert tracker.reset_faults() == {}
    tracker.clear(GPU, "lost")  # it answers again: the problem's quiet period, then recovered
    assert (tracker.health(GPU).healthy, tracker.health(GPU).reason) == (False, "GPULost")
    clock.advance(300)
    tracker.tick()
    assert (tracker.health(GPU).healthy, tracker.health(GPU).reason) == (True, REASON_RECOVERED)
    assert not tracker.clear_faults("GPU-unknown", message="cleared")
