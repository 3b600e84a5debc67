"""The Reservations table and what Reservations hold on the GPU map, over plain objects."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from apis.crds.reservation import ControllerRef, ObjectRef, Reservation, ReservationOwner
from apis.errors import ValidationError
from apis.extension import names
from apis.k8s.labels import LabelSelector
from dashboard import gpumap, reservations
from dashboard.invalid import Invalid, tolerant
from tests.support.gpuobjects import GPU_MEMORY, NOW, make_device, make_pod, make_reservation, reservation_manifest

CONSUMED = names.ANNOTATION_RESERVATION_ALLOCATED


def test_an_available_reservation_is_drawn_as_reserved_with_its_owners() -> None:
    held = make_reservation("trainer", node="n1", gpus={0: 100, 1: 50})
    built = gpumap.build([make_device("n1")], [make_pod("other", node="n1", gpus={1: 25})], [held])
    gpus = {g.minor: g for g in built.nodes[0].gpus}
    assert gpus[0].reserved == (gpumap.Reserved("trainer", ("labels app=train",), 100, GPU_MEMORY, 100),)
    assert (gpus[0].used_core, gpus[0].reserved_core, gpus[0].free_core) == (0, 100, 0)
    assert (gpus[1].used_core, gpus[1].reserved_core, gpus[1].free_core) == (25, 50, 25)
    assert not gpus[2].reserved
    totals = gpumap.totals(built.nodes, {})
    assert (totals.allocated, totals.reserved, totals.idle) == (25, 150, 225)


def test_an_owner_placed_onto_it_is_marked_and_takes_its_part_out_of_the_reserved() -> None:
    # allocateOnce: false keeps the Reservation Available while its owner runs on half of it.
    held = make_reservation("shared", node="n1", gpus={0: 100})
    owner = make_pod("infer", node="n1", gpus={0: 50}, annotations={CONSUMED: '{"name":"shared","uid":"uid-shared"}'})
    gpu = gpumap.build([make_device("n1")], [owner], [held]).nodes[0].gpus[0]
    assert [(s.pod, s.reservation) for s in gpu.shares] == [("default/infer", "shared")]
    assert [(r.reservation, r.core, r.memory) for r in gpu.reserved] == [("shared", 50, GPU_MEMORY // 2)]
    assert gpu.free_core == 0


@pytest.mark.parametrize("phase", ["Pending", "Succeeded", "Failed"])
def test_only_a_reservation_that_holds_resources_is_drawn(phase: str) -> None:
    held = make_reservation("r", node="n1", gpus={0: 100}, phase=phase)
    gpu = gpumap.build([make_device("n1")], [], [held]).nodes[0].gpus[0]
    assert gpu.reserved == () and gpu.free_core == 100


def test_a_reservations_unreadable_annotation_is_a_problem_not_a_crash() -> None:
    held = make_reservation("bad", node="n1", gpus={0: 100})
    meta = dataclasses.replace(held.meta, annotations={names.ANNOTATION_DEVICE_ALLOCATED: "{not json"})
    built = gpumap.build([make_device("n1")], [], [dataclasses.replace(held, meta=meta)])
    assert len(built.problems) == 1 and built.problems[0].startswith("reservation bad: ")
    assert reservations.device_text(dataclasses.replace(held, meta=meta)).startswith("unreadable: ")


def test_the_table_says_what_each_holds_for_whom_and_until_when() -> None:
    available = make_reservation("trainer", node="n1", gpus={0: 100, 1: 100}, created="2026-11-24T17:30:00Z")
    pending = make_reservation(
        "big",
        gpus={0: 100},
        conditions=[
            {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}
        ],
    )
    expired = make_reservation(
        "old",
        phase="Failed",
        created="2026-11-24T16:00:00Z",
        conditions=[{"type": "Ready", "status": "False", "reason": "Expired", "message": "expired after 1h"}],
    )
    used = make_reservation("used", node="n2", gpus={3: 50}, phase="Succeeded", current_owners=["ml/infer-0"])
    rows = reservations.rows([used, expired, available, pending])
    assert [r.name for r in rows] == ["big", "trainer", "used", "old"]
    big, trainer, done, old = rows
    assert big.reason == "Unschedulable: 0/3 nodes are available" and big.node == ""
    assert big.holds == "nvidia.com/gpu=1" and big.devices == ""
    assert trainer.holds == "nvidia.com/gpu=2" and trainer.devices == "GPU 0 100% · GPU 1 100%"
    assert trainer.owners == ("labels app=train",) and trainer.reason == ""
    assert trainer.expires == (NOW + datetime.timedelta(minutes=30)).timestamp()
    assert trainer.expires_at == "2026-11-24T18:30:00Z"
    assert trainer.created == (NOW - datetime.timedelta(minutes=30)).timestamp()
    assert done.current_owners == ("ml/infer-0",) and done.expires is None
    assert old.reason == "Expired: expired after 1h" and old.expires is None


def test_ttl_zero_never_expires_and_unschedulable_says_so() -> None:
    forever = make_reservation("forever", node="n1", gpus={0: 100}, ttl="0")
    held = dataclasses.replace(make_reservation("held", node="n2", gpus={1: 100}), unschedulable=True)
    rows = {r.name: r for r in reservations.rows([forever, held])}
    assert rows["forever"].expires is None and rows["forever"].expires_at == ""
    assert rows["held"].reason.startswith("spec.unschedulable")


def test_owners_are_named_for_people() -> None:
    owners = [
        ReservationOwner(object_ref=ObjectRef(namespace="ml", name="x")),
        ReservationOwner(controller=ControllerRef(kind="StatefulSet", name="trainer", namespace="ml")),
        ReservationOwner(
            controller=ControllerRef(kind="Job", name="j"), label_selector=LabelSelector({"app": "infer", "b": "2"})
        ),
    ]
    assert [reservations.owners_text(o) for o in owners] == [
        "pod ml/x",
        "StatefulSet ml/trainer",
        "Job j & labels app=infer,b=2",
    ]


def test_a_reservation_that_does_not_parse_is_listed_as_invalid_with_the_error() -> None:
    raw = reservation_manifest("broken", ttl="forever")
    parsed = tolerant("Reservation", Reservation.from_dict)(raw)
    assert isinstance(parsed, Invalid) and parsed.name == "broken"
    with pytest.raises(ValidationError) as raised:
        Reservation.from_dict(raw)
    (row,) = reservations.rows([parsed])
    assert (row.name, row.phase, row.reason) == ("broken", reservations.INVALID, str(raised.value))
    assert "spec.ttl" in row.reason
    # ... and the map, given it, draws nothing and raises nothing.
    assert gpumap.build([make_device("n1")], [], [parsed]).nodes[0].gpus[0].reserved == ()


def test_a_parse_that_is_not_refused_input_is_returned_as_is() -> None:
    good = reservation_manifest("good", node="n1", gpus={0: 100})
    assert tolerant("Reservation", Reservation.from_dict)(good) == Reservation.from_dict(good)
    assert tolerant("Reservation", Reservation.from_dict)({"metadata": "no"}) == Invalid(
        "Reservation", "", "", "", str(_error({"metadata": "no"}))
    )


def _error(raw: object) -> Exception:
    try:
        Reservation.from_dict(raw)
    except ValidationError as e:
        return e
    raise AssertionError("parsed")
