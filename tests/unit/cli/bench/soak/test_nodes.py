"""Lost nodes: no new placement on a node the soak saw lost, and its pods evicted once their
toleration ran out; the record's sightings of lost nodes and evictable pods; fit leaves lost nodes out."""

from __future__ import annotations

import dataclasses

from apis.extension import names
from apis.k8s.core import Node, Taint
from cli.bench.soak.fit import FreeDevices
from cli.bench.soak.invariants.liveness import lost
from cli.bench.soak.invariants.nodes import not_evicted, placed_on_lost_node
from cli.bench.soak.observe import Record
from cli.bench.soak.state import ClusterState
from tests.unit.cli.bench.soak.builders import NOW, WHOLE, node, pod, state

SINCE = NOW - 100
UNREACHABLE = (
    Taint(names.TAINT_NODE_UNREACHABLE, "", names.TAINT_EFFECT_NO_SCHEDULE),
    Taint(names.TAINT_NODE_UNREACHABLE, "", names.TAINT_EFFECT_NO_EXECUTE),
)


def _lost(name: str = "n1", taints: tuple[Taint, ...] = UNREACHABLE) -> Node:
    built, _ = node(name)
    return dataclasses.replace(built, taints=taints, ready=False)


def _state(created: float, *, since: float = SINCE, deleting: bool = False) -> ClusterState:
    return state(
        [pod("a", node_name="n1", gpus={2: WHOLE}, deleting=deleting)],
        created={"soak/a": created},
        lost_since={"n1": since},
    )


def test_a_pod_created_after_the_node_was_seen_lost_must_not_be_placed_there() -> None:
    [violation] = placed_on_lost_node(_state(SINCE + 11), seen_within_s=10)
    assert violation.objects == ("node/n1", "soak/a")
    assert placed_on_lost_node(_state(SINCE - 5), seen_within_s=10) == []  # it was there before
    assert placed_on_lost_node(_state(SINCE + 9), seen_within_s=10) == []  # the scheduler is learning
    assert placed_on_lost_node(state([pod("a", node_name="n1")], created={"soak/a": NOW}), seen_within_s=10) == []


def test_a_pod_still_on_a_node_lost_longer_than_its_toleration_was_not_evicted() -> None:
    [violation] = not_evicted(_state(SINCE - 50), toleration_s=8)
    assert violation.objects == ("node/n1", "soak/a") and "tolerate 8 s" in violation.message
    assert not_evicted(_state(SINCE - 50, since=NOW - 5), toleration_s=8) == []  # still tolerated
    assert not_evicted(_state(SINCE - 50, deleting=True), toleration_s=8) == []  # on its way


def test_the_record_sees_lost_nodes_until_they_are_back_and_pods_that_may_be_evicted() -> None:
    record = Record()
    healthy, _ = node("n2")
    on_lost, elsewhere = pod("a", node_name="n1"), pod("b", node_name="n2")
    record.saw_nodes([_lost(), healthy], [on_lost, elsewhere], 10.0)
    record.saw_nodes([_lost(), healthy], [on_lost, elsewhere], 20.0)
    assert record.lost_since == {"n1": 10.0} and record.evictable == {"soak/a"}
    record.saw_nodes([_lost(taints=UNREACHABLE[:1])], [pod("c", node_name="n1")], 25.0)
    assert record.evictable == {"soak/a"}  # NoSchedule alone evicts nothing
    record.saw_nodes([healthy], [], 30.0)
    assert record.lost_since == {}


def test_an_evicted_pod_is_not_lost() -> None:
    gone = state([], acknowledged={"soak/a": "uid-a"}, evictable=frozenset({"soak/a"}))
    assert lost(gone) == []
    assert len(lost(state([], acknowledged={"soak/a": "uid-a"}))) == 1


def test_a_lost_node_has_no_room_for_pending_pods() -> None:
    _, device = node("n1")
    waiting = pod("w")
    assert FreeDevices(state([waiting], [(_lost(), device)])).place(waiting) is False
    back = dataclasses.replace(_lost(), ready=True)  # Ready again, the taint not yet cleared
    assert FreeDevices(state([waiting], [(back, device)])).place(waiting) is False
    assert FreeDevices(state([waiting], [node("n1")])).place(waiting) is True


def test_a_pod_gone_from_a_lost_node_counts_as_evicted_unless_the_soak_deleted_it_first() -> None:
    record = Record()
    record.saw_nodes([_lost()], [pod("a", node_name="n1"), pod("b", node_name="n1")], 10.0)
    record.deleting("soak/b")
    for key in ("soak/a", "soak/b", "soak/c"):
        record.saw_gone(key)
    record.deleting("soak/a")  # the soak's own delete of it, later, changes nothing
    assert record.evicted == 1
