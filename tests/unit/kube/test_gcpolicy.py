"""kube.gcpolicy: what survives a full collection is frozen; a cycle among frozen objects is freed
after the thaw interval."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from kube import gcpolicy


class Cyclic:
    """An object that refers to itself: only the cycle collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def clock() -> Iterator[list[float]]:
    now = [0.0]
    gcpolicy.uninstall()
    gcpolicy.install(thaw_interval=100.0, clock=lambda: now[0])
    try:
        yield now
    finally:
        gcpolicy.uninstall()


def test_survivors_of_a_full_collection_are_frozen(clock: list[float]) -> None:
    frozen_at_start = gc.get_freeze_count()
    assert frozen_at_start > 0  # what existed at install
    kept = [[i] for i in range(10_000)]
    gc.collect()
    assert gc.get_freeze_count() >= frozen_at_start + len(kept)


def test_a_cycle_among_frozen_objects_is_freed_after_the_thaw(clock: list[float]) -> None:
    thing = Cyclic()
    alive = weakref.ref(thing)
    gc.collect()  # frozen with the other survivors
    del thing
    gc.collect()
    assert alive() is not None  # frozen: no collection looks at it
    clock[0] = 150.0
    gc.collect()  # this one thaws, after it ran
    gc.collect()  # and this one sees everything
    assert alive() is None
