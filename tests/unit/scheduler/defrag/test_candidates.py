"""Who may move: every refusal, each on its own, and a pod that may."""

from __future__ import annotations

import dataclasses

import pytest

from apis.extension import names
from apis.k8s.core import Pod
from scheduler.cache import Holdings
from scheduler.defrag.candidates import Refusal, gpu_percent, refusal
from tests.support.builders import bound_pod, controlled, gpu_alloc, make_pod

PENDING = make_pod("train", nvidia_gpu=8)
GANG = {names.ANNOTATION_GANG_NAME: "g", names.ANNOTATION_GANG_MIN_AVAILABLE: "2"}
BASE = controlled(bound_pod("small", "node-a", gpu_alloc(0, 30), gpu_alloc(1, 20), gpu_core=50))


def meta(**changes: object) -> Pod:
    return dataclasses.replace(BASE, meta=dataclasses.replace(BASE.meta, **changes))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pod", "exclude", "served", "why"),
    [
        (BASE, frozenset(), True, None),
        (bound_pod("bare", "node-a", gpu_alloc(0, 30)), frozenset(), True, Refusal.NO_CONTROLLER),
        (BASE, frozenset({"default/small"}), True, Refusal.EXCLUDED),
        (meta(deletion_timestamp="2026-01-01T00:00:00Z"), frozenset(), True, Refusal.DELETING),
        (BASE, frozenset(), False, Refusal.NOT_OURS),
        (dataclasses.replace(BASE, priority=10), frozenset(), True, Refusal.PRIORITY),
        (meta(annotations={names.ANNOTATION_DEVICE_ALLOCATED: "not json"}), frozenset(), True, Refusal.UNKNOWN_DEVICES),
        (meta(annotations={**BASE.annotations, **GANG}), frozenset(), True, Refusal.GANG),
        (meta(labels={names.LABEL_POD_GROUP: "g"}), frozenset(), True, Refusal.GANG),
    ],
    ids=[
        "movable",
        "no-controller",
        "excluded",
        "deleting",
        "not-ours",
        "priority",
        "bad-annotation",
        "gang",
        "pod-group",
    ],
)
def test_refusal(pod: Pod, exclude: frozenset[str], served: bool, why: str | None) -> None:
    assert refusal(Holdings().info(pod), PENDING, exclude=exclude, served=lambda _: served) == why


def test_gpu_percent_sums_the_shares_of_every_gpu() -> None:
    assert gpu_percent(Holdings().info(BASE)) == 50
