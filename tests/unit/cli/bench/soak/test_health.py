"""No new placement on a GPU the soak saw unhealthy (plus the scheduler's time to see it)."""

from __future__ import annotations

from cli.bench.soak.invariants.health import placed_on_unhealthy
from cli.bench.soak.state import ClusterState
from tests.unit.cli.bench.soak.builders import NOW, WHOLE, node, pod, state

SINCE = NOW - 100


def _state(created: float) -> ClusterState:
    return state(
        [pod("a", node_name="n1", gpus={2: WHOLE})],
        [node(unhealthy=[2])],
        created={"soak/a": created},
        unhealthy_since={("n1", 2): SINCE},
    )


def test_a_pod_created_after_the_failure_was_seen_must_not_get_the_gpu() -> None:
    [violation] = placed_on_unhealthy(_state(SINCE + 11), seen_within_s=10)
    assert violation.objects == ("n1/gpu-2", "soak/a")


def test_a_pod_placed_before_or_while_the_scheduler_learns_of_it_may_keep_it() -> None:
    assert placed_on_unhealthy(_state(SINCE - 5), seen_within_s=10) == []
    assert placed_on_unhealthy(_state(SINCE + 9), seen_within_s=10) == []


def test_a_gpu_seen_healthy_again_may_be_given() -> None:
    healthy = state([pod("a", node_name="n1", gpus={2: WHOLE})], created={"soak/a": SINCE + 50})
    assert placed_on_unhealthy(healthy, seen_within_s=10) == []
