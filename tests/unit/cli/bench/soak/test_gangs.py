"""A Strict gang is wholly bound or wholly unbound; half bound is a violation (after its grace)."""

from __future__ import annotations

from apis.extension import names
from apis.k8s.core import Pod
from cli.bench.soak.invariants.gangs import half_bound
from tests.unit.cli.bench.soak.builders import WHOLE, pod, state


def _member(i: int, *, bound: bool, mode: str = "Strict", deleting: bool = False) -> Pod:
    gang = {names.ANNOTATION_GANG_NAME: "g", names.ANNOTATION_GANG_MIN_AVAILABLE: "3", names.ANNOTATION_GANG_MODE: mode}
    if bound:
        return pod(f"g-{i}", node_name="n1", gpus={i: WHOLE}, annotations=gang, deleting=deleting)
    return pod(f"g-{i}", annotations=gang, deleting=deleting)


def test_whole_and_unbound_gangs_are_fine() -> None:
    assert half_bound(state([_member(i, bound=True) for i in range(3)])) == []
    assert half_bound(state([_member(i, bound=False) for i in range(3)])) == []


def test_a_half_bound_strict_gang_names_its_bound_and_pending_members() -> None:
    [violation] = half_bound(state([_member(0, bound=True), _member(1, bound=False), _member(2, bound=False)]))
    assert violation.objects == ("gang soak/g", "soak/g-0", "soak/g-1", "soak/g-2")
    assert "1 of its min-available 3" in violation.message


def test_non_strict_gangs_and_members_being_deleted_are_not_judged() -> None:
    assert (
        half_bound(state([_member(0, bound=True, mode="NonStrict"), _member(1, bound=False, mode="NonStrict")])) == []
    )
    retiring = [_member(0, bound=True, deleting=True), _member(1, bound=False), _member(2, bound=False)]
    assert half_bound(state(retiring)) == []
