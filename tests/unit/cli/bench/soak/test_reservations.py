"""The Reservation invariants, and Reservations' holdings in the devices family and the fit model,
on hand-built states: each finds its bad state, and a good one is clean."""

from __future__ import annotations

from cli.bench.soak.fit import FreeDevices
from cli.bench.soak.invariants.devices import given_twice, over_committed
from cli.bench.soak.invariants.reservations import consumed_after_expiry, non_owner, not_expired, owners_beyond_once
from tests.unit.cli.bench.soak.builders import HALF, WHOLE, on_reservation, pod, reservation, state


def test_an_available_reservation_holds_its_gpu_beside_the_pods() -> None:
    held = reservation("r", gpus={0: WHOLE})
    stranger = pod("stranger", node_name="n1", gpus={0: HALF})
    bad = state([stranger], reservations=(held,), reservations_before=(held,))
    [twice] = given_twice(bad)
    assert twice.objects == ("n1/gpu-0", "reservation/r", "soak/stranger")
    assert [v.objects for v in over_committed(bad)] == [("n1/gpu-0", "reservation/r", "soak/stranger")]


def test_an_owner_placed_onto_the_reservation_holds_it_instead() -> None:
    held = reservation("r", gpus={0: WHOLE})
    owner = on_reservation(pod("owner", node_name="n1", gpus={0: WHOLE}, labels={"owner": "r"}), held)
    good = state([owner], reservations=(held,), reservations_before=(held,))
    assert given_twice(good) == over_committed(good) == []


def test_a_reservation_that_held_in_one_listing_only_is_not_judged_against_the_pods() -> None:
    """It expired (or was placed) while the pods were listed: they are of another moment."""
    before, after = reservation("r", gpus={0: WHOLE}), reservation("r", gpus={0: WHOLE}, phase="Failed")
    stranger = pod("stranger", node_name="n1", gpus={0: WHOLE})
    assert given_twice(state([stranger], reservations=(after,), reservations_before=(before,))) == []
    assert given_twice(state([stranger], reservations=(before,), reservations_before=())) == []


def test_the_fit_model_counts_a_reservation_held_in_either_listing_as_taken() -> None:
    gpus = {m: WHOLE for m in range(8)}
    held = reservation("r", gpus=gpus)
    whole = pod("pending", {"nvidia.com/gpu": "1"})
    assert not FreeDevices(state([], reservations=(), reservations_before=(held,))).place(whole)
    assert FreeDevices(state([], reservations=(), reservations_before=())).place(whole)


def test_a_pod_that_is_no_owner_consuming_a_reservation_is_a_violation() -> None:
    r = reservation("r", gpus={0: WHOLE})
    stranger = on_reservation(pod("stranger", node_name="n1", labels={"owner": "someone-else"}), r)
    [violation] = non_owner(state([stranger], reservations=(r,)))
    assert violation.objects == ("reservation/r", "soak/stranger")
    owner = on_reservation(pod("owner", node_name="n1", labels={"owner": "r"}), r)
    assert non_owner(state([owner], reservations=(r,))) == []


def test_an_allocate_once_reservation_has_at_most_one_owner() -> None:
    r = reservation("r", phase="Succeeded")
    owners = [on_reservation(pod(n, node_name="n1", labels={"owner": "r"}), r) for n in ("a", "b")]
    [violation] = owners_beyond_once(state(owners, reservations=(r,)))
    assert violation.objects == ("reservation/r", "soak/a", "soak/b")
    assert owners_beyond_once(state(owners[:1], reservations=(r,))) == []
    shared = reservation("r", allocate_once=False)
    assert owners_beyond_once(state(owners, reservations=(shared,))) == []
    two_in_status = reservation("r", phase="Succeeded", current_owners=("a", "b"))
    assert len(owners_beyond_once(state([], reservations=(two_in_status,)))) == 1


def test_a_pod_created_after_its_reservation_expired_must_not_have_consumed_it() -> None:
    r = reservation("r", ttl="10s", created="2026-01-01T00:00:00Z", phase="Succeeded")
    late = on_reservation(pod("late", node_name="n1", labels={"owner": "r"}), r)
    expiry = r.expiry()
    assert expiry is not None
    bad = state([late], reservations=(r,), created={"soak/late": expiry.timestamp() + 5})
    assert [v.objects for v in consumed_after_expiry(bad)] == [("reservation/r", "soak/late")]
    good = state([late], reservations=(r,), created={"soak/late": expiry.timestamp() - 1})
    assert consumed_after_expiry(good) == []


def test_an_available_reservation_past_its_expiry_has_not_been_expired() -> None:
    """NOW (the builders') is 1970-01-12: a 1 h ttl from 1970-01-01 has long passed."""
    old = reservation("r", created="1970-01-01T00:00:00Z", ttl="1h")
    assert [v.objects for v in not_expired(state([], reservations=(old,)))] == [("reservation/r",)]
    expired = reservation("r", created="1970-01-01T00:00:00Z", ttl="1h", phase="Failed")
    young = reservation("r", created="1970-01-12T13:00:00Z", ttl="1h")
    assert not_expired(state([], reservations=(expired, young))) == []
