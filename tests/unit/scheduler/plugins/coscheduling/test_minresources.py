"""The minResources pre-check on its own: counted units, the gang's own pods, pod slots, and the
memo that makes a gang that does not fit cheap to check again."""

from __future__ import annotations

import pytest

from apis.extension import names
from scheduler.cache import ClusterCache, PodInfo
from scheduler.plugins.coscheduling.minresources import ClusterFree, Shortfall, shortfalls
from tests.support.builders import bound_pod, gpu_alloc, make_node
from tests.support.scheduling import make_cache


def cluster(*used: int) -> ClusterCache:
    """8-GPU nodes n0, n1, …, node i with `used[i]` whole GPUs taken by another pod."""
    cache = make_cache(*(make_node(f"n{i}") for i in range(len(used))))
    for i, gpus in enumerate(used):
        if gpus:
            cache.add_pod(bound_pod(f"other-{i}", f"n{i}", *(gpu_alloc(m) for m in range(gpus)), nvidia_gpu=gpus))
    return cache


def check(cache: ClusterCache, want: dict[str, int], minimum: int = 1) -> list[Shortfall]:
    return shortfalls(want, minimum, cache.nodes(), [])


def test_whole_gpus_are_counted_as_the_gpu_resources_nodes_publish() -> None:
    cache = cluster(6, 6, 6)  # 6 GPUs free in all
    assert check(cache, {names.NVIDIA_GPU: 6}) == []
    assert check(cache, {names.NVIDIA_GPU: 7}) == [
        Shortfall(names.GPU_CORE, 700, 600),
        Shortfall(names.GPU_MEMORY_RATIO, 700, 600),
    ]
    # The same GPUs asked as percent: the same answer.
    assert check(cache, {names.KOORD_GPU: 600}) == []
    assert check(cache, {names.GPU_CORE: 650})[0] == Shortfall(names.GPU_CORE, 650, 600)


def test_the_gangs_own_pods_count_as_free() -> None:
    cache = cluster(0, 8)
    member = bound_pod("member", "n0", *(gpu_alloc(m) for m in range(8)), nvidia_gpu=8)
    cache.add_pod(member)
    assert check(cache, {names.NVIDIA_GPU: 8}) != []  # someone else's: no room
    assert shortfalls({names.NVIDIA_GPU: 8}, 1, cache.nodes(), [("n0", PodInfo.of(member))]) == []


def test_pod_slots_are_min_member_and_a_node_without_a_limit_has_none() -> None:
    cache = cluster(0)
    limit = cache.nodes()[0].allocatable.get(names.PODS)
    assert limit is not None
    assert check(cache, {}, minimum=limit) == []
    assert check(cache, {}, minimum=limit + 1) == [Shortfall(names.PODS, limit + 1, limit)]


def test_other_resources_count_as_themselves_and_a_missing_one_has_nothing_free() -> None:
    cache = cluster(0)
    assert check(cache, {"example.com/foo": 1}) == [Shortfall("example.com/foo", 1, 0)]
    cpu = cache.nodes()[0].allocatable[names.CPU]
    assert check(cache, {names.CPU: cpu}) == []
    assert check(cache, {names.CPU: cpu + 1}) == [Shortfall(names.CPU, cpu + 1, cpu)]


@pytest.mark.parametrize("own_node", [None, "n1"], ids=["no-own-pods", "own-pod-on-n1"])
def test_the_memo_gives_the_answer_a_full_pass_gives_until_the_cache_changes(own_node: str | None) -> None:
    cache = cluster(7, 3, 8)
    own = []
    if own_node is not None:
        member = bound_pod("member", own_node, gpu_alloc(7), nvidia_gpu=1)
        cache.add_pod(member)
        own = [(own_node, PodInfo.of(member))]
    want = {names.NVIDIA_GPU: 9, names.CPU: 1000}
    memo = ClusterFree()
    first = shortfalls(want, 2, cache.nodes(), own, memo=memo, generation=cache.generation)
    assert first == shortfalls(want, 2, cache.nodes(), own)  # remembered, same answer
    assert first == shortfalls(want, 2, cache.nodes(), own, memo=memo, generation=cache.generation)
    cache.remove_pod(bound_pod("other-2", "n2", nvidia_gpu=8))  # room appears: a new generation
    assert shortfalls(want, 2, cache.nodes(), own, memo=memo, generation=cache.generation) == []
