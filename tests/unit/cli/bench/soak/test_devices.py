"""The device invariants on hand-built states: each finds its bad state, and a good one is clean."""

from __future__ import annotations

import dataclasses

from apis.extension import names
from cli.bench.soak.invariants.devices import given_twice, over_committed, unknown
from tests.unit.cli.bench.soak.builders import HALF, WHOLE, node, pod, state


def test_shares_within_a_gpu_are_fine() -> None:
    good = state([pod("a", node_name="n1", gpus={0: HALF}), pod("b", node_name="n1", gpus={0: HALF})])
    assert over_committed(good) == given_twice(good) == unknown(good) == []


def test_shares_beyond_a_gpu_are_over_committed_naming_the_gpu_and_every_holder() -> None:
    pods = [pod(name, node_name="n1", gpus={3: HALF}) for name in ("a", "b", "c")]
    [violation] = over_committed(state(pods))
    assert violation.objects == ("n1/gpu-3", "soak/a", "soak/b", "soak/c")
    assert "150 > 100" in violation.message


def test_a_whole_gpu_given_to_two_pods_is_given_twice() -> None:
    bad = state([pod("a", node_name="n1", gpus={1: WHOLE}), pod("b", node_name="n1", gpus={1: {names.GPU_CORE: 10}})])
    [violation] = given_twice(bad)
    assert violation.objects == ("n1/gpu-1", "soak/a", "soak/b")


def test_a_virtual_function_held_by_two_pods_is_given_twice() -> None:
    bad = state([pod("a", node_name="n1", vfs={0: [2]}), pod("b", node_name="n1", vfs={0: [2]})])
    assert [v.objects for v in given_twice(bad)] == [("n1/rdma-0/vf-2", "soak/a", "soak/b")]
    assert given_twice(state([pod("a", node_name="n1", vfs={0: [2]}), pod("b", node_name="n1", vfs={0: [3]})])) == []


def test_pods_on_a_gpu_that_failed_after_they_were_placed_do_not_over_commit_it() -> None:
    """An unhealthy GPU's CR has no resources; its capacity is still 100 percent."""
    on_failed = state([pod("a", node_name="n1", gpus={2: WHOLE})], [node(unhealthy=[2])])
    assert over_committed(on_failed) == []
    twice = state([pod(n, node_name="n1", gpus={2: WHOLE}) for n in "ab"], [node(unhealthy=[2])])
    assert [v.objects for v in over_committed(twice)] == [("n1/gpu-2", "soak/a", "soak/b")]


def test_finished_pods_hold_nothing_but_pods_being_deleted_still_do() -> None:
    done = dataclasses.replace(pod("a", node_name="n1", gpus={0: WHOLE}), phase="Succeeded")
    assert given_twice(state([done, pod("b", node_name="n1", gpus={0: WHOLE})])) == []
    deleting = pod("a", node_name="n1", gpus={0: WHOLE}, deleting=True)
    assert len(given_twice(state([deleting, pod("b", node_name="n1", gpus={0: WHOLE})]))) == 1


def test_a_device_the_node_lacks_and_a_malformed_annotation_are_unknown() -> None:
    missing = pod("a", node_name="n1", gpus={9: WHOLE})
    malformed = pod("b", node_name="n1", annotations={names.ANNOTATION_DEVICE_ALLOCATED: "{not json"})
    found = unknown(state([missing, malformed]))
    assert [v.objects for v in found] == [("n1/gpu-9", "soak/a"), ("soak/b",)]
