"""The status transitions the scheduler writes on a Reservation (Koordinator's phases and reasons)."""

from __future__ import annotations

from apis.crds.reservation import Reservation, ReservationPhase
from apis.extension import names
from scheduler.core import reservations as transitions
from tests.support.builders import make_pod, make_reservation

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


def conditions(reservation: Reservation) -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status, c.reason, c.last_transition_time) for c in reservation.conditions}


def test_pending_then_placed_then_succeeded() -> None:
    r = make_reservation(requests={names.NVIDIA_GPU: "2"})
    pending = transitions.unschedulable(r, message="0/1 nodes are available", now=T0)
    again = transitions.unschedulable(pending, message="0/1 nodes are available", now=T1)
    assert conditions(again) == {"Scheduled": ("False", "Unschedulable", T0)}  # time kept: no change
    placed = transitions.placed(again, node="n1", now=T1)
    assert placed.phase is ReservationPhase.AVAILABLE and placed.node_name == "n1"
    assert conditions(placed) == {"Scheduled": ("True", "Scheduled", T1), "Ready": ("True", "Available", T1)}
    assert placed.allocatable == {names.NVIDIA_GPU: 2}
    owner = make_pod("owner", node="n1", nvidia_gpu=2)
    done = transitions.consumed(placed, [owner], now=T1)
    assert done.phase is ReservationPhase.SUCCEEDED and conditions(done)["Ready"][:2] == ("False", "Succeeded")
    assert [o.name for o in done.current_owners] == ["owner"] and done.allocated[names.NVIDIA_GPU] == 2
    # Round trip through the status JSON the scheduler patches.
    raw = done.to_dict()
    raw["status"] = transitions.status_of(done)
    assert Reservation.from_dict(raw).phase is ReservationPhase.SUCCEEDED


def test_not_allocate_once_stays_available_and_expiry_says_when() -> None:
    r = transitions.placed(make_reservation(requests={"cpu": "1"}, allocate_once=False), node="n1", now=T0)
    kept = transitions.consumed(r, [make_pod("a", node="n1", cpu=1000)], now=T1)
    assert kept.phase is ReservationPhase.AVAILABLE and [o.name for o in kept.current_owners] == ["a"]
    gone = transitions.expired(r, now=T1)
    assert gone.phase is ReservationPhase.FAILED and gone.is_expired
    [ready] = [c for c in gone.conditions if c.type == "Ready"]
    assert ready.message == "expired at 2026-01-01T01:00:00Z unused"


def test_invalid_status_names_why() -> None:
    status = transitions.invalid_status("spec.ttl: 'soon' is not a duration", now=T0)
    assert status["phase"] == "Pending"
    assert status["conditions"] == [
        {
            "type": "Scheduled",
            "status": "False",
            "reason": "Invalid",
            "message": "spec.ttl: 'soon' is not a duration",
            "lastTransitionTime": T0,
        }
    ]


def test_shared_owners_are_listed_by_uid_and_allocated_sums_what_is_reserved() -> None:
    shared = make_reservation(requests={"cpu": "6", "memory": "20Gi"}, allocate_once=False)
    r = transitions.placed(shared, node="n1", now=T0)
    b = make_pod("b", node="n1", cpu=2000, memory=10 * 2**30, gpu_core=50, gpu_ratio=50)
    a = make_pod("a", node="n1", cpu=2000, memory=10 * 2**30)
    both = transitions.consumed(r, [b, a], now=T1)
    assert both.phase is ReservationPhase.AVAILABLE
    assert [o.to_dict() for o in both.current_owners] == [
        {"namespace": "default", "name": "a", "uid": "uid-default-a"},
        {"namespace": "default", "name": "b", "uid": "uid-default-b"},
    ]
    assert both.allocated == {"cpu": 4000, "memory": 20 * 2**30}  # the GPU share is not reserved here
    assert transitions.status_of(both)["allocated"] == {"cpu": "4", "memory": "20Gi"}
    # Owners gone: none listed, nothing allocated, still Available until it expires.
    empty = transitions.consumed(both, [], now=T1)
    assert empty.current_owners == () and empty.allocated == {} and empty.phase is ReservationPhase.AVAILABLE
    # Expiring with owners on it says so (no "unused").
    [ready] = [c for c in transitions.expired(both, now=T1).conditions if c.type == "Ready"]
    assert ready.message == "expired at 2026-01-01T01:00:00Z"
