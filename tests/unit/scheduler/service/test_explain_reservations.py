"""Explain with Reservations: other pods are told who holds the room, owners see it free."""

from __future__ import annotations

from apis.extension import names
from scheduler.service.explain import evaluate
from tests.support.builders import make_node, make_pod, make_reservation
from tests.support.scheduling import make_scheduler


def test_explain_names_the_reservation_to_others_and_frees_it_for_its_owner() -> None:
    scheduler = make_scheduler(make_node("node-a"))
    scheduler.place_reservation(make_reservation("held", requests={names.NVIDIA_GPU: "6"}), now="2026-01-01T00:00:00Z")
    framework = scheduler.frameworks[names.SCHEDULER_NAME]
    other = evaluate(framework, scheduler.cache, make_pod("other", nvidia_gpu=4))
    [verdict] = other.verdicts
    messages = [s.message for s in verdict.rejections]
    assert any(m.startswith("reserved by reservation held (") and "nvidia.com/gpu=6" in m for m in messages)
    owner = evaluate(framework, scheduler.cache, make_pod("owner", labels={"app": "train"}, nvidia_gpu=6))
    assert owner.fits == ("node-a",) and owner.verdicts == ()
